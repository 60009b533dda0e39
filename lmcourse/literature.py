"""The course's bibliography and the published numbers the lessons quote.

Every number from the literature that a lesson, a preset or the results table prints comes from
:data:`PUBLISHED`, and every entry names its source by a key of :data:`REFERENCES` and the exact
table it stands in. ``BIBLIOGRAPHY.md`` at the top of the repository is the same list for
reading; a test keeps the two in step.

    >>> cite("merity2018")
    'Merity et al. 2018'
    >>> published("ptb", "AWD-LSTM").test
    57.3
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Reference:
    authors: str  # "Merity, Keskar, Socher"
    year: int
    title: str
    venue: str
    url: str
    short: str  # how the course cites it: "Merity et al. 2018"


REFERENCES: dict[str, Reference] = {}  # key -> reference, filled below


def _add(key: str, authors: str, year: int, title: str, venue: str, url: str, short: str) -> None:
    REFERENCES[key] = Reference(authors, year, title, venue, url, short)


_add("kneser1995", "Kneser, Ney", 1995, "Improved backing-off for M-gram language modeling", "ICASSP 1995",
     "https://doi.org/10.1109/ICASSP.1995.479394", "Kneser & Ney 1995")
_add("chen1999", "Chen, Goodman", 1999, "An empirical study of smoothing techniques for language modeling",
     "Computer Speech & Language 13(4)", "https://doi.org/10.1006/csla.1999.0128", "Chen & Goodman 1999")
_add("heafield2011", "Heafield", 2011, "KenLM: Faster and smaller language model queries",
     "Workshop on Statistical Machine Translation 2011", "https://aclanthology.org/W11-2123", "Heafield 2011")
_add("heafield2013", "Heafield, Pouzyrevsky, Clark, Koehn", 2013,
     "Scalable modified Kneser-Ney language model estimation", "ACL 2013", "https://aclanthology.org/P13-2121",
     "Heafield et al. 2013")
_add("marcus1993", "Marcus, Santorini, Marcinkiewicz", 1993,
     "Building a large annotated corpus of English: the Penn Treebank", "Computational Linguistics 19(2)",
     "https://aclanthology.org/J93-2004", "Marcus et al. 1993")
_add("mikolov2010", "Mikolov, Karafiat, Burget, Cernocky, Khudanpur", 2010,
     "Recurrent neural network based language model", "Interspeech 2010",
     "https://www.isca-archive.org/interspeech_2010/mikolov10_interspeech.html", "Mikolov et al. 2010")
_add("mikolov2011", "Mikolov, Deoras, Kombrink, Burget, Cernocky", 2011,
     "Empirical evaluation and combination of advanced language modeling techniques", "Interspeech 2011",
     "https://www.isca-archive.org/interspeech_2011/mikolov11b_interspeech.html", "Mikolov et al. 2011")
_add("mikolov2012", "Mikolov, Zweig", 2012, "Context dependent recurrent neural network language model",
     "IEEE SLT 2012", "https://doi.org/10.1109/SLT.2012.6424228", "Mikolov & Zweig 2012")
_add("hochreiter1997", "Hochreiter, Schmidhuber", 1997, "Long short-term memory", "Neural Computation 9(8)",
     "https://doi.org/10.1162/neco.1997.9.8.1735", "Hochreiter & Schmidhuber 1997")
_add("gers2000", "Gers, Schmidhuber, Cummins", 2000, "Learning to forget: continual prediction with LSTM",
     "Neural Computation 12(10)", "https://doi.org/10.1162/089976600300015015", "Gers et al. 2000")
_add("greff2017", "Greff, Srivastava, Koutnik, Steunebrink, Schmidhuber", 2017, "LSTM: a search space odyssey",
     "IEEE Trans. Neural Networks and Learning Systems 28(10)", "https://arxiv.org/abs/1503.04069", "Greff et al. 2017")
_add("jozefowicz2015", "Jozefowicz, Zaremba, Sutskever", 2015, "An empirical exploration of recurrent network architectures",
     "ICML 2015", "https://proceedings.mlr.press/v37/jozefowicz15.html", "Jozefowicz et al. 2015")
_add("karpathy2016", "Karpathy, Johnson, Fei-Fei", 2016, "Visualizing and understanding recurrent networks",
     "ICLR 2016 workshop", "https://arxiv.org/abs/1506.02078", "Karpathy et al. 2016")
_add("linzen2016", "Linzen, Dupoux, Goldberg", 2016, "Assessing the ability of LSTMs to learn syntax-sensitive dependencies",
     "TACL 4", "https://aclanthology.org/Q16-1037", "Linzen et al. 2016")
_add("bengio1994", "Bengio, Simard, Frasconi", 1994,
     "Learning long-term dependencies with gradient descent is difficult", "IEEE Trans. Neural Networks 5(2)",
     "https://doi.org/10.1109/72.279181", "Bengio et al. 1994")
_add("pascanu2013", "Pascanu, Mikolov, Bengio", 2013, "On the difficulty of training recurrent neural networks",
     "ICML 2013", "https://proceedings.mlr.press/v28/pascanu13.html", "Pascanu et al. 2013")
_add("karpathy2015", "Karpathy", 2015, "The unreasonable effectiveness of recurrent neural networks (char-rnn)",
     "blog post and code", "https://github.com/karpathy/char-rnn", "Karpathy 2015")
_add("holtzman2020", "Holtzman, Buys, Du, Forbes, Choi", 2020, "The curious case of neural text degeneration",
     "ICLR 2020", "https://arxiv.org/abs/1904.09751", "Holtzman et al. 2020")
_add("srivastava2014", "Srivastava, Hinton, Krizhevsky, Sutskever, Salakhutdinov", 2014,
     "Dropout: a simple way to prevent neural networks from overfitting", "JMLR 15",
     "https://jmlr.org/papers/v15/srivastava14a.html", "Srivastava et al. 2014")
_add("zaremba2014", "Zaremba, Sutskever, Vinyals", 2014, "Recurrent neural network regularization",
     "arXiv:1409.2329", "https://arxiv.org/abs/1409.2329", "Zaremba et al. 2014")
_add("wan2013", "Wan, Zeiler, Zhang, LeCun, Fergus", 2013, "Regularization of neural networks using DropConnect",
     "ICML 2013", "https://proceedings.mlr.press/v28/wan13.html", "Wan et al. 2013")
_add("gal2016", "Gal, Ghahramani", 2016,
     "A theoretically grounded application of dropout in recurrent neural networks", "NeurIPS 2016",
     "https://arxiv.org/abs/1512.05287", "Gal & Ghahramani 2016")
_add("press2017", "Press, Wolf", 2017, "Using the output embedding to improve language models", "EACL 2017",
     "https://aclanthology.org/E17-2025", "Press & Wolf 2017")
_add("inan2017", "Inan, Khosravi, Socher", 2017,
     "Tying word vectors and word classifiers: a loss framework for language modeling", "ICLR 2017",
     "https://arxiv.org/abs/1611.01462", "Inan et al. 2017")
_add("polyak1992", "Polyak, Juditsky", 1992, "Acceleration of stochastic approximation by averaging",
     "SIAM J. Control and Optimization 30(4)", "https://doi.org/10.1137/0330046", "Polyak & Juditsky 1992")
_add("merity2017", "Merity, Xiong, Bradbury, Socher", 2017, "Pointer sentinel mixture models (WikiText)",
     "ICLR 2017", "https://arxiv.org/abs/1609.07843", "Merity et al. 2017")
_add("merity2018", "Merity, Keskar, Socher", 2018, "Regularizing and optimizing LSTM language models",
     "ICLR 2018", "https://arxiv.org/abs/1708.02182", "Merity et al. 2018")
_add("melis2018", "Melis, Dyer, Blunsom", 2018, "On the state of the art of evaluation in neural language models",
     "ICLR 2018", "https://arxiv.org/abs/1707.05589", "Melis et al. 2018")
_add("yang2018", "Yang, Dai, Salakhutdinov, Cohen", 2018,
     "Breaking the softmax bottleneck: a high-rank RNN language model", "ICLR 2018",
     "https://arxiv.org/abs/1711.03953", "Yang et al. 2018")
_add("kuhn1990", "Kuhn, De Mori", 1990, "A cache-based natural language model for speech recognition",
     "IEEE TPAMI 12(6)", "https://doi.org/10.1109/34.56193", "Kuhn & De Mori 1990")
_add("grave2017", "Grave, Joulin, Usunier", 2017, "Improving neural language models with a continuous cache",
     "ICLR 2017", "https://arxiv.org/abs/1612.04426", "Grave et al. 2017")
_add("krause2018", "Krause, Kahembwe, Murray, Renals", 2018, "Dynamic evaluation of neural sequence models",
     "ICML 2018", "https://arxiv.org/abs/1709.07432", "Krause et al. 2018")
_add("pytorch-examples", "PyTorch contributors", 2017,
     "word_language_model, README at commit bcea1f5 (PTB results, 2017-03-10)", "pytorch/examples",
     "https://github.com/pytorch/examples/blob/bcea1f5/word_language_model/README.md", "pytorch/examples 2017")
_add("awd-code", "Salesforce Research", 2017, "awd-lstm-lm: the AWD-LSTM code (README, main.py, pointer.py)",
     "GitHub", "https://github.com/salesforce/awd-lstm-lm", "awd-lstm-lm code")
_add("mos-code", "Yang, Dai", 2018, "mos: the mixture-of-softmaxes code (README, model.py)", "GitHub",
     "https://github.com/zihangdai/mos", "mos code")
_add("vaswani2017", "Vaswani, Shazeer, Parmar, Uszkoreit, Jones, Gomez, Kaiser, Polosukhin", 2017,
     "Attention is all you need", "NeurIPS 2017", "https://arxiv.org/abs/1706.03762", "Vaswani et al. 2017")
_add("xiong2020", "Xiong, Yang, He, Zheng, Zheng, Xing, Zhang, Lan, Wang, Liu", 2020,
     "On layer normalization in the Transformer architecture", "ICML 2020", "https://arxiv.org/abs/2002.04745",
     "Xiong et al. 2020")
_add("dyneval-code", "Krause", 2018, "dynamic-evaluation: the code (README, dynamiceval.py)", "GitHub",
     "https://github.com/benkrause/dynamic-evaluation", "dynamic-evaluation code")

_add("takase2018", "Takase, Suzuki, Nagata", 2018, "Direct output connection for a high-rank language model",
     "EMNLP 2018", "https://arxiv.org/abs/1808.10143", "Takase et al. 2018")
_add("gong2018", "Gong, He, Tan, Qin, Wang, Liu", 2018, "FRAGE: frequency-agnostic word representation",
     "NeurIPS 2018", "https://arxiv.org/abs/1809.06858", "Gong et al. 2018")
_add("press2019", "Press", 2019, "Partially shuffling the training data to improve language models", "arXiv:1903.04167",
     "https://arxiv.org/abs/1903.04167", "Press 2019")
_add("dai2019", "Dai, Yang, Yang, Carbonell, Le, Salakhutdinov", 2019,
     "Transformer-XL: attentive language models beyond a fixed-length context", "ACL 2019",
     "https://arxiv.org/abs/1901.02860", "Dai et al. 2019")
_add("bai2019", "Bai, Kolter, Koltun", 2019, "Trellis networks for sequence modeling", "ICLR 2019",
     "https://arxiv.org/abs/1810.06682", "Bai et al. 2019")
_add("melis2020", "Melis, Kocisky, Blunsom", 2020, "Mogrifier LSTM", "ICLR 2020", "https://arxiv.org/abs/1909.01792",
     "Melis et al. 2020")
_add("melis2022", "Melis", 2022, "Circling back to recurrent models of language", "arXiv:2211.01848",
     "https://arxiv.org/abs/2211.01848", "Melis 2022")
_add("nlp-progress", "Ruder and contributors", 2022, "NLP-progress: language modeling (english/language_modeling.md)",
     "GitHub", "https://github.com/sebastianruder/NLP-progress/blob/master/english/language_modeling.md",
     "NLP-progress")


def cite(key: str) -> str:
    """How the course cites a reference in running text: ``'Merity et al. 2018'``."""
    if key not in REFERENCES:
        raise KeyError(f"No reference {key!r} in the bibliography: use one of {', '.join(sorted(REFERENCES))}.")
    return REFERENCES[key].short


@dataclass(frozen=True)
class Published:
    """One published perplexity, where it stands, and the setting it ran at."""

    dataset: str  # "ptb" | "wikitext-2"
    model: str
    valid: Optional[float]
    test: Optional[float]
    source: str  # a key of REFERENCES
    where: str  # "Table 1"
    params: str = ""  # "24M"
    note: str = ""

    @property
    def citation(self) -> str:
        return f"{cite(self.source)}, {self.where}"


SINCE_2018 = "a record since 2018"  # the note of the rows after the models the course rebuilds
_LISTED = "as listed in NLP-progress, language-modelling Table"  # checked against the papers' repositories

PUBLISHED: list[Published] = [
    # Penn Treebank, word level, 10k vocabulary
    Published("ptb", "KN5", None, 141.2, "mikolov2012", "as listed in Merity et al. 2018, Table 1", "2M"),
    Published("ptb", "KN5 + cache", None, 125.7, "mikolov2012", "as listed in Merity et al. 2018, Table 1", "2M"),
    Published("ptb", "LSTM small, no dropout", 120.7, 114.5, "zaremba2014", "Table 1", "5M"),
    Published("ptb", "LSTM medium + dropout", 86.2, 82.7, "zaremba2014", "Table 1", "20M"),
    Published("ptb", "LSTM large + dropout", 82.2, 78.4, "zaremba2014", "Table 1", "66M"),
    Published("ptb", "Variational LSTM medium", 81.9, 79.7, "gal2016", "Table 1", "20M"),
    Published("ptb", "Variational LSTM medium, MC dropout", None, 78.6, "gal2016", "Table 1", "20M"),
    Published("ptb", "Variational LSTM large", 77.9, 75.2, "gal2016", "Table 1", "66M"),
    Published("ptb", "LSTM 2x650, 40 epochs", None, 80.97, "pytorch-examples", "README results table", "20M"),
    Published("ptb", "LSTM 2x650 tied, 40 epochs", None, 75.96, "pytorch-examples", "README results table", "13M"),
    Published("ptb", "LSTM 2x1500, 40 epochs", None, 77.42, "pytorch-examples", "README results table", "66M"),
    Published("ptb", "LSTM 2x1500 tied, 40 epochs", None, 72.30, "pytorch-examples", "README results table", "51M"),
    Published("ptb", "Variational LSTM tied + augmented loss", 75.7, 73.2, "inan2017",
              "as listed in Merity et al. 2018, Table 1", "24M"),
    Published("ptb", "Variational LSTM tied + augmented loss, large", 71.1, 68.5, "inan2017",
              "as listed in Merity et al. 2018, Table 1", "51M"),
    Published("ptb", "LSTM", None, 82.3, "grave2017", "Table 1"),
    Published("ptb", "LSTM + neural cache", None, 72.1, "grave2017", "Table 1"),
    Published("ptb", "4-layer skip LSTM, tuned", 60.9, 58.3, "melis2018", "as listed in Merity et al. 2018, Table 1",
              "24M"),
    Published("ptb", "AWD-LSTM, before finetuning", 60.7, 58.8, "merity2018", "Table 4", "24M"),
    # Merity et al. 2018, Table 4: the full model with one part removed at a time (before finetuning lacks the last step)
    Published("ptb", "AWD-LSTM without NT-ASGD", 66.3, 63.7, "merity2018", "Table 4", "24M"),
    Published("ptb", "AWD-LSTM without variable sequence lengths", 61.3, 58.9, "merity2018", "Table 4", "24M"),
    Published("ptb", "AWD-LSTM without weight decay", 63.7, 61.0, "merity2018", "Table 4", "24M"),
    Published("ptb", "AWD-LSTM without AR/TAR", 62.7, 60.3, "merity2018", "Table 4", "24M"),
    Published("ptb", "AWD-LSTM without full-sized embedding", 68.0, 65.6, "merity2018", "Table 4", "24M"),
    Published("ptb", "AWD-LSTM without weight dropping", 71.1, 68.9, "merity2018", "Table 4", "24M"),
    Published("ptb", "AWD-LSTM", 60.0, 57.3, "merity2018", "Table 1", "24M"),
    Published("ptb", "AWD-LSTM + cache", 53.9, 52.8, "merity2018", "Table 1", "24M"),
    # the awd-lstm-lm README's own runs (finetuned, then its pointer.py cache; PyTorch 0.4 code; "≈" on PTB)
    Published("ptb", "AWD-LSTM, finetuned (README)", 58.8, 56.5, "awd-code", "README results table, approximate", "24M"),
    Published("ptb", "AWD-LSTM, finetuned (README) + cache", 53.2, 52.5, "awd-code", "README results table, approximate",
              "24M"),
    Published("ptb", "AWD-LSTM + dynamic evaluation", 51.6, 51.1, "krause2018", "Table 2", "24M"),
    Published("ptb", "LSTM (Chainer, small)", 88.0, 85.0, "krause2018", "Table 1"),
    Published("ptb", "LSTM (Chainer, small) + dynamic evaluation", 73.5, 71.7, "krause2018", "Table 1"),
    Published("ptb", "AWD-LSTM + MoS, before finetuning", 58.08, 55.97, "yang2018", "Table 1", "22M"),
    Published("ptb", "AWD-LSTM + MoS", 56.54, 54.44, "yang2018", "Table 1", "22M"),
    Published("ptb", "AWD-LSTM + MoS + dynamic evaluation", 48.33, 47.69, "yang2018", "Table 1", "22M"),
    # Penn Treebank: the records since 2018 (refs: the NLP-progress table, checked against each repository)
    Published("ptb", "AWD-LSTM-DOC", 54.12, 52.38, "takase2018", _LISTED, "23M", SINCE_2018),
    Published("ptb", "AWD-LSTM-DOC + Partial Shuffle", 53.79, 52.0, "press2019", _LISTED, "23M", SINCE_2018),
    Published("ptb", "FRAGE + AWD-LSTM-MoS", None, 53.31, "gong2018", _LISTED, "22M", SINCE_2018),
    Published("ptb", "FRAGE + AWD-LSTM-MoS + dynamic evaluation", 47.38, 46.54, "gong2018", _LISTED, "22M", SINCE_2018),
    Published("ptb", "Trellis network", None, 54.19, "bai2019", _LISTED, "34M", SINCE_2018),
    Published("ptb", "Transformer-XL", None, 54.52, "dai2019", _LISTED, "24M", SINCE_2018),
    Published("ptb", "Mogrifier LSTM", 51.4, 50.1, "melis2020", _LISTED, "24M", SINCE_2018),
    Published("ptb", "Mogrifier LSTM + dynamic evaluation", 44.9, 44.8, "melis2020", _LISTED, "24M", SINCE_2018),
    Published("ptb", "Mogrifier RLSTM", 48.9, 47.9, "melis2022", _LISTED, "24M", SINCE_2018),
    Published("ptb", "Mogrifier RLSTM + dynamic evaluation", 42.9, 42.9, "melis2022", _LISTED, "24M", SINCE_2018),
    # WikiText-2, word level, 33,278 vocabulary
    Published("wikitext-2", "LSTM", None, 99.3, "grave2017", "Table 2"),
    Published("wikitext-2", "LSTM + neural cache, 100 states", None, 81.6, "grave2017", "Table 2"),
    Published("wikitext-2", "LSTM + neural cache, 2,000 states", None, 68.9, "grave2017", "Table 2"),
    Published("wikitext-2", "Variational LSTM tied + augmented loss", 91.5, 87.0, "inan2017",
              "as listed in Merity et al. 2018, Table 2", "28M"),
    Published("wikitext-2", "AWD-LSTM, before finetuning", 69.1, 66.0, "merity2018", "Table 4", "33M"),
    Published("wikitext-2", "AWD-LSTM without NT-ASGD", 73.3, 69.7, "merity2018", "Table 4", "33M"),
    Published("wikitext-2", "AWD-LSTM without variable sequence lengths", 69.3, 66.2, "merity2018", "Table 4", "33M"),
    Published("wikitext-2", "AWD-LSTM without weight decay", 71.1, 67.9, "merity2018", "Table 4", "33M"),
    Published("wikitext-2", "AWD-LSTM without AR/TAR", 73.2, 69.5, "merity2018", "Table 4", "33M"),
    Published("wikitext-2", "AWD-LSTM without full-sized embedding", 73.7, 70.7, "merity2018", "Table 4", "33M"),
    Published("wikitext-2", "AWD-LSTM without weight dropping", 78.4, 74.9, "merity2018", "Table 4", "33M"),
    Published("wikitext-2", "AWD-LSTM", 68.6, 65.8, "merity2018", "Table 2", "33M"),
    Published("wikitext-2", "AWD-LSTM + cache", 53.8, 52.0, "merity2018", "Table 2", "33M"),
    Published("wikitext-2", "AWD-LSTM, finetuned (README)", 67.4, 64.7, "awd-code", "README results table", "33M"),
    Published("wikitext-2", "AWD-LSTM, finetuned (README) + cache", 52.2, 50.6, "awd-code", "README results table", "33M"),
    Published("wikitext-2", "AWD-LSTM + dynamic evaluation", 46.4, 44.3, "krause2018", "Table 3", "33M"),
    Published("wikitext-2", "AWD-LSTM + MoS, before finetuning", 66.01, 63.33, "yang2018", "Table 2", "35M"),
    Published("wikitext-2", "AWD-LSTM + MoS", 63.88, 61.45, "yang2018", "Table 2", "35M"),
    Published("wikitext-2", "AWD-LSTM + MoS + dynamic evaluation", 42.41, 40.68, "yang2018", "Table 2", "35M"),
    # WikiText-2: the records since 2018
    Published("wikitext-2", "AWD-LSTM-DOC", None, 58.03, "takase2018", _LISTED, "37M", SINCE_2018),
    Published("wikitext-2", "AWD-LSTM-DOC + Partial Shuffle", None, 57.85, "press2019", _LISTED, "", SINCE_2018),
    Published("wikitext-2", "FRAGE + AWD-LSTM-MoS + dynamic evaluation", None, 39.14, "gong2018", _LISTED, "",
              SINCE_2018),
    Published("wikitext-2", "Mogrifier LSTM", None, 55.1, "melis2020", _LISTED, "35M", SINCE_2018),
    Published("wikitext-2", "Mogrifier LSTM + dynamic evaluation", None, 38.6, "melis2020", _LISTED, "35M", SINCE_2018),
    Published("wikitext-2", "Mogrifier RLSTM", None, 55.0, "melis2022", _LISTED, "24M", SINCE_2018),
    Published("wikitext-2", "Mogrifier RLSTM + dynamic evaluation", None, 38.0, "melis2022", _LISTED, "24M", SINCE_2018),
]


def published(dataset: str, model: str) -> Published:
    """The published row for ``model`` on ``dataset`` (names as in :data:`PUBLISHED`)."""
    for row in PUBLISHED:
        if row.dataset == dataset and row.model == model:
            return row
    names = ", ".join(repr(r.model) for r in PUBLISHED if r.dataset == dataset) or "none"
    raise KeyError(f"No published row {model!r} for {dataset!r}: the rows are {names}.")


def rows(dataset: str) -> list[Published]:
    """All published rows for ``dataset``, in the order above."""
    return [r for r in PUBLISHED if r.dataset == dataset]
