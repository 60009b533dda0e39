"""The embedded corpus: size, determinism, and the phenomena each lesson needs."""
import hashlib
from dataclasses import replace

import numpy as np
import pytest
import torch

from lmcourse.corpora.embedded import CHECKSUMS, ensure, intact, load_params, write_corpus
from lmcourse.corpora.grammar import CAT, Params, build_lexicon, phrase_rules
from lmcourse.corpora.oracle import Oracle
from lmcourse.corpora.wordcheck import DICTIONARY, check_folder, english_share
from lmcourse.lm import perplexity
from lmcourse.ngram.model import NGramLM
from lmcourse.vocab import Vocab

SMALL = replace(Params(), train_tokens=20_000, valid_tokens=3_000, test_tokens=3_000)


def read_split(folder, split, vocab):
    words = []
    for line in (folder / f"{split}.txt").read_text().splitlines():
        words += line.split() + ["<eos>"]
    return vocab.encode(words)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = ensure(tmp_path_factory.mktemp("embedded") / "default")
    vocab = Vocab((folder / "vocab.txt").read_text().splitlines())
    return folder, vocab, {s: read_split(folder, s, vocab) for s in ("train", "valid", "test")}


def digest(folder):
    return {f: hashlib.sha256((folder / f).read_bytes()).hexdigest() for f in ("train.txt", "valid.txt", "test.txt", "vocab.txt")}


def test_same_seed_same_bytes_and_other_seed_differs(tmp_path):
    a, b = write_corpus(tmp_path / "a", SMALL), write_corpus(tmp_path / "b", SMALL)
    c = write_corpus(tmp_path / "c", replace(SMALL, seed=SMALL.seed + 1))
    assert digest(a) == digest(b)
    assert digest(a)["train.txt"] != digest(c)["train.txt"]
    assert load_params(a) == SMALL


# The digest of SMALL's four files, as written with the pinned numpy (requirements.lock). Every draw
# is an integer draw from integer weights, so another machine must write the same bytes; a change
# to the generative story must bump embedded.FORMAT and this digest together.
SMALL_DIGEST = "d3d88d938d13e8fc241016a67d61f50411e9bccd9b57e115d7695b1e8aae4edc"


def test_bytes_match_the_pinned_digest(tmp_path):
    folder = write_corpus(tmp_path / "small", SMALL)
    h = hashlib.sha256()
    for name in ("train.txt", "valid.txt", "test.txt", "vocab.txt"):
        h.update((folder / name).read_bytes())
    assert h.hexdigest() == SMALL_DIGEST


def test_sizes_are_ptb_like(corpus):
    _, vocab, splits = corpus
    assert 950_000 <= len(splits["train"]) <= 1_050_000
    for s in ("valid", "test"):
        assert 78_000 <= len(splits[s]) <= 82_000
    assert 9_000 <= len(vocab) <= 11_000
    assert {"<eos>", "<unk>", "N", "<doc>"} <= set(vocab.itos)
    seen = torch.unique(splits["train"]).numel()
    assert seen > 0.7 * len(vocab)  # most types occur; a Zipf tail stays rare


def test_every_line_is_grammatical(corpus):
    _, vocab, splits = corpus
    oracle = Oracle(vocab)
    for s in ("valid", "test"):
        assert torch.isfinite(oracle.score(splits[s])).all()


def test_long_range_agreement_and_paired_delimiters(corpus):
    _, vocab, splits = corpus
    x = splits["test"]
    verbs, dist = Oracle(vocab).agreement(x)
    assert (dist > 5).float().mean() > 0.05          # many verbs sit beyond a 5-gram's window
    lex = build_lexicon(Params())
    head = x[verbs - dist].numpy()
    head_pl = np.isin(lex.cat[head], [CAT["NOUN_PL"], CAT["PRON_PL"]])
    verb_pl = lex.cat[x[verbs].numpy()] == CAT["VERB_PL"]
    assert np.array_equal(head_pl, verb_pl)          # the verb's number always follows its subject
    lrb, rrb = vocab.stoi["-lrb-"], vocab.stoi["-rrb-"]
    line = torch.cat([torch.zeros(1, dtype=torch.long), torch.cumsum(x[:-1] == vocab.eos, 0)])
    opens = torch.bincount(line[x == lrb], minlength=int(line[-1]) + 1)
    closes = torch.bincount(line[x == rrb], minlength=int(line[-1]) + 1)
    assert opens.sum() > 50 and torch.equal(opens, closes)
    span = torch.nonzero(x == rrb).squeeze(1) - torch.nonzero(x == lrb).squeeze(1)
    assert (span > 4).float().mean() > 0.2           # many parentheses close beyond a 5-gram


def test_rare_names_recur_within_documents(corpus):
    _, vocab, splits = corpus
    x = splits["train"].numpy()
    lex = build_lexicon(Params())
    is_name = lex.cat[x] == CAT["NAME"]
    doc = np.cumsum(x == vocab.stoi["<doc>"])[is_name]
    names = x[is_name]
    key = doc * len(vocab) + names
    _, first = np.unique(key, return_index=True)
    repeat_share = 1 - len(first) / len(names)
    assert repeat_share > 0.5                         # most mentions repeat a name from the same doc
    per_type = np.bincount(names)[np.unique(names)]
    n_docs_per_type = np.bincount(np.unique(key) % len(vocab))[np.unique(names)]
    assert np.median(n_docs_per_type) <= 2            # ...yet a typical name lives in one or two docs
    assert np.median(per_type) >= 2


def test_topics_shift_between_documents(corpus):
    _, vocab, splits = corpus
    x = splits["valid"]
    post = Oracle(vocab).topic_posterior(x)
    ends = torch.nonzero(x == vocab.stoi["<doc>"]).squeeze(1)[1:] - 1
    assert post[ends].max(1).values.mean() > 0.9     # by a document's end its topic is clear
    winners = post[ends].argmax(1)
    assert winners.unique().numel() == Params().n_topics  # and documents differ in topic


def test_fixed_expressions_make_a_trigram_pay(tmp_path):
    """The fixed expressions are what a trigram and a 4-gram gain from. With phrase_rate=0, and
    without the two word-level preferences (a verb's favourite objects two or three words on, agent
    nouns as subjects: a "the" after a verb or at a sentence start), the words two back tell nothing
    the last word does not, and the trigram gains nothing."""
    ppl, fixed_words = {}, {}
    for rate in (1.0, 0.0):
        params = replace(Params(), train_tokens=200_000, valid_tokens=30_000, test_tokens=1_000, phrase_rate=rate)
        if rate == 0.0:
            params = replace(params, preference=1.0, agent_boost=1)
        folder = write_corpus(tmp_path / str(rate), params)
        vocab = Vocab((folder / "vocab.txt").read_text().splitlines())
        train, valid = read_split(folder, "train", vocab), read_split(folder, "valid", vocab)
        fixed_words[rate] = int(np.isin(build_lexicon(params).cat[train.numpy()], CAT["FIXED"]).sum())
        ppl[rate] = {n: perplexity(NGramLM(vocab, n, "mkn", mode="stream").fit(train), valid) for n in (2, 3, 4)}
    assert ppl[1.0][3] < 0.95 * ppl[1.0][2] and ppl[1.0][4] <= ppl[1.0][3]
    assert ppl[0.0][3] > 0.98 * ppl[0.0][2]
    assert fixed_words[1.0] > 1000 and fixed_words[0.0] == 0


def test_phrases_of_one_host_must_not_be_prefixes_of_each_other():
    rules = phrase_rules("OPOST", [("at the end", 1.0, "END"), ("at the same time", 1.0, "END")])
    assert ("PH:OPOST>at the", "end", "END", 1.0) in rules and ("OPOST", "at", "PH:OPOST>at", 2.0) in rules
    with pytest.raises(ValueError, match="prefix of another phrase"):
        phrase_rules("OPOST", [("a year", 1.0, "END"), ("a year ago", 1.0, "END")])


def test_english_share_leaves_markup_numbers_and_punctuation_out():
    tokens = "the bank <eos> N $ -lrb- zikard banks 3.5 , the <unk> <doc> well-known".split()
    share = english_share(tokens, {"the", "bank", "well-known"})
    assert share["n_tokens"] == 6 and share["n_types"] == 5        # the x2, bank, zikard, banks, well-known
    assert share["tokens"] == pytest.approx(4 / 6) and share["types"] == pytest.approx(3 / 5)
    with pytest.raises(ValueError, match="no words"):
        english_share(["<eos>", "N", "$"], {"the"})


def test_the_corpus_is_english(corpus, capsys):
    """Real words, not invented ones: the default corpus's word tokens and types against Debian's
    word list (case-folded) and the census names."""
    if not DICTIONARY.is_file():
        pytest.skip(f"Debian's word list is not installed at {DICTIONARY} (apt-get install wamerican).")
    folder, _, _ = corpus
    share = check_folder(folder)
    with capsys.disabled():
        print(f"\nembedded corpus, training split: {share['tokens']:.1%} of word tokens and {share['types']:.1%} "
              f"of word types are dictionary words")
    assert share["tokens"] >= 0.95 and share["types"] >= 0.85


@pytest.mark.parametrize("damage", ["a word changed", "a file missing", "a file cut short", "no checksums"])
def test_a_damaged_corpus_folder_is_generated_again(tmp_path, damage):
    folder = ensure(tmp_path / "small", SMALL)
    whole = digest(folder)
    if damage == "a word changed":
        train = folder / "train.txt"
        train.write_text(train.read_text().replace(" the ", " thy ", 1))
    elif damage == "a file missing":
        (folder / "valid.txt").unlink()
    elif damage == "a file cut short":
        (folder / "test.txt").write_bytes((folder / "test.txt").read_bytes()[:100])
    else:
        (folder / CHECKSUMS).unlink()
    assert not intact(folder)
    assert ensure(folder, SMALL) == folder and intact(folder) and digest(folder) == whole
