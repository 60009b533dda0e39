"""The presets: the papers' recipes field by field, each cited; the scales shrink sizes, data and
epochs only; --set reads each value as its field's type; Zaremba's per-sequence loss converts exactly."""
import pytest
import torch

from lmcourse import config, literature
from lmcourse.networks.models import RNNLM, LMConfig
from lmcourse.training import presets as P

PAPER_RECIPES = {  # the published commands, read off the sources each preset cites
    "zaremba-medium": dict(num_layers=2, emb_size=650, hidden_size=650, dropout=0.5, dropout_kind="standard",
                           init_range=0.05, init_all=True, clip=5.0, bptt=35, batch_size=20, lr=1.0, epochs=39,
                           decay_after=6, tie=False, optimizer="sgd"),
    "pytorch-examples": dict(emb_size=650, hidden_size=650, dropout=0.5, epochs=40, tie=True, lr=20.0, clip=0.25,
                             lr_decay=4.0, num_layers=2),
    "pytorch-examples-large": dict(emb_size=1500, hidden_size=1500, dropout=0.65, epochs=40, tie=True),
    "awd-lstm-ptb": dict(batch_size=20, dropouti=0.4, dropouth=0.25, seed=141, epochs=500, emb_size=400,
                         hidden_size=1150, num_layers=3, lr=30.0, clip=0.25, bptt=70, dropout=0.4, dropoute=0.1,
                         wdrop=0.5, alpha=2.0, beta=1.0, weight_decay=1.2e-6, nonmono=5, optimizer="ntasgd",
                         variable_bptt=True, tie=True, max_seq_len_delta=None),
    "awd-lstm-ptb-finetune": dict(optimizer="asgd", lr=30.0, max_seq_len_delta=10, stop_nonmono=True, batch_size=20),
    "awd-lstm-wt2": dict(epochs=750, dropouth=0.2, seed=1882, batch_size=80, dropouti=0.65),
    "awd-lstm-wt2-finetune": dict(optimizer="asgd", max_seq_len_delta=10, stop_nonmono=True, seed=1882),
    "mos-ptb": dict(dropouti=0.4, dropoutl=0.29, dropouth=0.225, seed=28, batch_size=12, lr=20.0, epochs=1000,
                    hidden_size=960, last_size=620, emb_size=280, n_experts=15, head="mos", max_seq_len_delta=40,
                    small_batch_size=None, bptt=70),
    "mos-ptb-finetune": dict(lr=25.0, optimizer="asgd", stop_nonmono=True, max_seq_len_delta=40, n_experts=15),
    "mos-wt2": dict(epochs=1000, dropouth=0.2, seed=1882, n_experts=15, hidden_size=1150, last_size=650,
                    emb_size=300, batch_size=15, lr=15.0, dropoutl=0.29, small_batch_size=5, max_seq_len_delta=20,
                    dropouti=0.55),
    "mos-wt2-finetune": dict(lr=20.0, optimizer="asgd", small_batch_size=5, max_seq_len_delta=20),
    # the course's own regime (lesson 10's, scaled to the AWD-LSTM's 24M), not a paper's
    "transformer-ptb": dict(kind="transformer", emb_size=512, num_layers=6, n_heads=8, ffn_size=2048, tie=True,
                            window=70, bptt=70, batch_size=20, optimizer="adam", warmup=200, lr=1e-3, lr_decay=2.0,
                            dropout=0.4, positions="learned"),
}


def test_every_preset_has_its_paper_values():
    assert set(PAPER_RECIPES) == set(P.PRESETS)
    for name, expected in PAPER_RECIPES.items():
        settings = P.PRESETS[name].settings
        for key, value in expected.items():
            assert settings[key] == value, f"{name}: {key}"


@pytest.mark.parametrize("name", list(P.PRESETS))
def test_every_field_is_set_and_cited(name):
    p = P.PRESETS[name]
    assert set(p.settings) == set(P.field_names(p.kind)) == set(p.sources)
    for key, source in p.sources.items():
        assert isinstance(source, str) and len(source) > 10, f"{name}: {key} has no source"
    for dataset, model in p.published:  # every number it claims is in the bibliography
        assert literature.published(dataset, model).test is not None


@pytest.mark.parametrize("name", list(P.PRESETS))
def test_the_scales_shrink_sizes_data_and_epochs_not_the_recipe(name):
    p = P.PRESETS[name]
    assert P.resolve(p, "gpu") == p.settings  # gpu: the paper's recipe unchanged
    for scale in ("ci", "cpu"):
        small = P.resolve(p, scale)
        changed = {k for k in small if small[k] != p.settings[k]}
        assert changed and changed <= P.SCALABLE, f"{name} at {scale} changes {changed - P.SCALABLE}"
        for k in ("emb_size", "hidden_size", "ffn_size", "epochs"):
            assert k not in small or small[k] <= p.settings[k]
        P.model_config(small, 50), P.train_config(small)  # valid settings
    ci, cpu = P.resolve(p, "ci"), P.resolve(p, "cpu")
    assert ci["train_tokens"] < cpu["train_tokens"] and ci["emb_size"] < cpu["emb_size"]


def test_scalable_fields_exclude_every_recipe_ingredient():
    recipe = {"optimizer", "lr", "clip", "dropout", "dropouth", "dropouti", "dropoute", "wdrop", "dropoutl",
              "variable_bptt", "alpha", "beta", "weight_decay", "tie", "head", "bptt", "batch_size",
              "max_seq_len_delta", "small_batch_size", "stop_nonmono", "lr_decay", "init_all", "loss_sum_over_time"}
    assert not recipe & P.SCALABLE


def test_finetuning_presets_continue_their_base_with_the_same_model():
    for p in P.PRESETS.values():
        if p.finetune_of is None:
            continue
        base = P.PRESETS[p.finetune_of]
        model = lambda s: {k: v for k, v in s.items() if P.field_names(p.kind)[k] == "model"}  # noqa: E731
        assert base.data == p.data and base.finetune_of is None
        for scale in config.SCALES:
            assert model(P.resolve(p, scale)) == model(P.resolve(base, scale))


def test_overrides_are_read_as_their_fields_types():
    got = P.parse_overrides(["lr=3", "epochs=2", "tie=false", "last_size=none", "dropout_kind=standard",
                             "train-tokens=500", "variable_bptt=1", "hidden_size=2e2"])
    assert got == dict(lr=3.0, epochs=2, tie=False, last_size=None, dropout_kind="standard", train_tokens=500,
                       variable_bptt=True, hidden_size=200)
    assert isinstance(got["lr"], float) and isinstance(got["epochs"], int) and isinstance(got["hidden_size"], int)


@pytest.mark.parametrize("pair, message", [
    ("lrr=3", r"there is no setting 'lrr'; the settings are .*\blr\b"),
    ("epochs=two", r"epochs takes a whole number, and 'two' is not one"),
    ("epochs=2.5", r"epochs takes a whole number, and '2\.5' is not one"),
    ("epochs=inf", r"epochs takes a whole number, and 'inf' is not one"),
    ("epochs=none", r"epochs cannot be none"),
    ("tie=maybe", r"tie takes true or false"),
    ("lr", r"write it as key=value"),
])
def test_bad_overrides_say_what_is_wrong_in_one_sentence(pair, message):
    with pytest.raises(ValueError, match=message) as err:
        P.parse_overrides([pair])
    assert "\n" not in str(err.value)


def test_unknown_preset_names_the_presets():
    with pytest.raises(KeyError, match="awd-lstm-ptb"):
        P.get("awd-lstm")


def _one_step(model, x, y, lr, clip, per_sequence):
    """One clipped SGD step; the loss summed over time (per_sequence) or averaged over tokens."""
    out = model(x)
    nll = torch.nn.functional.cross_entropy(out.logits.reshape(-1, out.logits.size(-1)), y.reshape(-1))
    loss = nll * x.size(0) if per_sequence else nll  # sum over T of the per-step mean over B
    model.zero_grad()
    loss.backward()
    norm = torch.sqrt(sum((p.grad ** 2).sum() for p in model.parameters()))
    scale = min(1.0, clip / float(norm))  # clipping by the norm, as the papers define it
    with torch.no_grad():
        for p in model.parameters():
            p.add_(p.grad, alpha=-lr * scale)
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_zaremba_per_sequence_loss_converts_to_the_same_step():
    settings = P.resolve(P.get("zaremba-medium"), "gpu")
    T = settings["bptt"]
    cfg = P.train_config(settings)
    assert cfg.lr == pytest.approx(1.0 * T) and cfg.clip == pytest.approx(5.0 / T)
    torch.manual_seed(0)
    x, y = torch.randint(0, 30, (T, 4)), torch.randint(0, 30, (T, 4))
    start = RNNLM(LMConfig(vocab_size=30, emb_size=8, hidden_size=8, num_layers=2)).double()
    gaps = []
    for lr, clip in ((1.0, 50.0), (1.0, 0.01)):  # the clip inactive, then active
        a, b, c = (RNNLM(start.config).double() for _ in range(3))
        for m in (a, b, c):
            m.load_state_dict(start.state_dict())
        paper = _one_step(a, x, y, lr, clip, per_sequence=True)
        ours = _one_step(b, x, y, lr * T, clip / T, per_sequence=False)
        naive = _one_step(c, x, y, lr, clip, per_sequence=False)  # the paper's numbers without converting
        for k in paper:
            torch.testing.assert_close(ours[k], paper[k], rtol=1e-9, atol=1e-12)
        gaps.append(max(float((naive[k] - paper[k]).abs().max()) for k in paper))
    assert gaps[0] > 1e-4  # unconverted, the paper's numbers take another step (a clipped step is the same)


def test_help_lines_carry_the_published_numbers():
    for p in P.PRESETS.values():
        line = P.describe(p)
        for row in P.published_rows(p):
            assert f"{row.test:g}" in line and row.citation in line


def test_the_transformer_preset_is_the_awd_lstms_size_and_says_whose_choice_it_is():
    from lmcourse.lm import model_builder
    from lmcourse.networks.transformer import TransformerConfig, count_parameters

    p = P.get("transformer-ptb")
    config = P.model_config(p.settings, 10_000)  # PTB's vocabulary
    assert isinstance(config, TransformerConfig) and config.window == p.settings["bptt"]
    assert 23e6 < count_parameters(config) < 25e6  # the AWD-LSTM's 24M (Merity et al. 2018)
    assert p.finetune_of is None and p.evaluation == {} and p.own
    assert "Not a paper's recipe; for comparison: Transformer-XL: test 54.52" in P.describe(p)
    assert not any(q.own for q in P.PRESETS.values() if q is not p)
    course = [k for k, source in p.sources.items() if "lesson 10's regime" in source]
    assert {"emb_size", "num_layers", "optimizer", "lr", "warmup", "epochs", "dropout"} <= set(course)
    assert P.AWD not in " ".join(p.sources[k] for k in ("lr", "warmup", "optimizer"))  # no paper's recipe claimed
    small = P.resolve(p, "ci")
    with torch.device("meta"):
        model = model_builder(small["kind"])(P.model_config(small, 50).as_dict())
    assert model.kind == "transformer"


def test_a_preset_keeps_its_model_kind_and_reads_its_kinds_fields():
    assert P.parse_overrides(["ffn_size=64", "window=10"], "transformer") == dict(ffn_size=64, window=10)
    with pytest.raises(ValueError, match="there is no setting 'ffn_size'"):
        P.parse_overrides(["ffn_size=64"])  # not a field of the recurrent model
    with pytest.raises(ValueError, match="model kind is its recipe"):
        P.parse_overrides(["kind=transformer"])
    settings = P.resolve(P.get("transformer-ptb"), "ci")
    with pytest.raises(ValueError, match="No model of kind 'gru2'"):
        P.check(dict(settings, kind="gru2"))
