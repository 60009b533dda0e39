"""Reference answers to the exercises of lesson 02 (the LSTM from its equations), and wrong answers their checks reject."""
from lmcourse.networks.gradflow import grad_norm_vs_lag


# 02.cifg
def cifg_step(x_t, h_prev, c_prev, W_ih, W_hh, b):
    z = x_t @ W_ih.T + h_prev @ W_hh.T + b                       # (B, 3H)
    z_f, z_g, z_o = z.chunk(3, dim=1)                              # each (B, H)
    f_t, g_t, o_t = z_f.sigmoid(), z_g.tanh(), z_o.sigmoid()
    c_t = f_t * c_prev + (1 - f_t) * g_t                           # what is forgotten is replaced
    h_t = o_t * c_t.tanh()
    return h_t, c_t


# 02.batches
batches_prediction = (62, 2, 26)   # floor(1000 / 16) = 62 rows; inputs cover rows 0..60: windows of 35 and 26


# 02.forget-bias
def survives(b_f):
    _, g = grad_norm_vs_lag("lstm", hidden_size=32, T=51, seed=0, forget_bias=b_f)
    return bool(g[50] >= 1e-3 * g[0])


smallest_forget_bias = next(b for b in [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0] if survives(b))
why_forget_bias = "a"    # f_t starts near 1: the gradient's product of gates shrinks slowly, but forgetting must be learned


def _input_gate_is_f(x_t, h_prev, c_prev, W_ih, W_hh, b):      # writes with f_t instead of 1 - f_t
    z_f, z_g, z_o = (x_t @ W_ih.T + h_prev @ W_hh.T + b).chunk(3, dim=1)
    f_t, g_t, o_t = z_f.sigmoid(), z_g.tanh(), z_o.sigmoid()
    c_t = f_t * c_prev + f_t * g_t
    return o_t * c_t.tanh(), c_t


def _no_tanh(x_t, h_prev, c_prev, W_ih, W_hh, b):              # shows the cell without squashing it
    z_f, z_g, z_o = (x_t @ W_ih.T + h_prev @ W_hh.T + b).chunk(3, dim=1)
    f_t, g_t, o_t = z_f.sigmoid(), z_g.tanh(), z_o.sigmoid()
    c_t = f_t * c_prev + (1 - f_t) * g_t
    return o_t * c_t, c_t


ANSWERS = {
    "02.cifg": cifg_step,
    "02.batches": batches_prediction,
    "02.forget-bias": smallest_forget_bias,
    "02.forget-bias-why": why_forget_bias,
}
WRONG = {
    "02.cifg": [_input_gate_is_f, _no_tanh],
    "02.batches": [(16, 62, 35), (62, 2, 27), (62, 1, 35)],
    "02.forget-bias": [1.0, 4.0],
    "02.forget-bias-why": ["b", "c", "d"],
}
