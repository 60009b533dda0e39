"""Derive the embedded corpus's word lists, ``english.tsv`` and ``names.tsv``, from their sources.

The course never runs this: the two lists it writes are committed beside it, so the corpus is
generated offline with no extra package. A maintainer who wants other words (a new word in
:mod:`lmcourse.corpora.topics`, say) installs the three sources and runs it once::

    pip install lemminflect==0.2.3 names==0.3.0 spacy-lookups-data==1.0.5
    python -m lmcourse.corpora.derive_words

Sources and licences (repeated in each list's header):

- inflections (plurals, third person singular, past tense) and parts of speech: LemmInflect 0.2.3,
  MIT licence, whose tables come from the NIH SPECIALIST Lexicon (open, free of charge);
- word frequencies, which order the long tail: spaCy's English ``lexeme_prob`` table in
  spacy-lookups-data 1.0.5, MIT licence;
- names: the US Census Bureau's 1990 first-name and surname lists (public domain), as shipped in
  the ``names`` package 0.3.0 (MIT licence).

A word is kept when it is lower case, of three letters or more, at least as frequent in lower
case as capitalised (so not mainly a name), and its inflected forms occur in the frequency
table. A lemma listed under several parts of speech goes to one of them: a verb where its past
tense is more frequent than its plural, else a noun unless it is also an adjective
whose plural is rarer than a seventh of its base form ("white"), else an adjective, else an adverb. Every lemma claims all its forms, and the
core words of :mod:`lmcourse.corpora.topics` claim theirs first, so no word has two classes.
A name is kept when it is not also an English word of the inflection tables.
"""
from __future__ import annotations

import csv
import gzip
import json
import re
from pathlib import Path

from ..checksum import atomic_write
from .topics import GENERAL, KEYS, TOPICS, VALUES

HERE = Path(__file__).parent
KEEP = {"noun": 3000, "verb": 1200, "adj": 2200, "adv": 400}
N_SURNAMES, N_FIRST = 3000, 1500
WORD = re.compile(r"[a-z]{3,}")
# Words left out of a course's text whatever their frequency: slurs, vulgar words and chat words.
BLOCKED = set("""fuck shit cunt bitch whore slut nigger nigga faggot fag retard dick cock pussy porn
rape rapist nazi jew tits boob dildo wank piss bastard asshole ass hell damn crap suck butt fart sex
sexy sexual drunk stupid dumb idiot lol dude guy gay lesbian homo kill murder suicide penis vagina
boobs horny nude naked vaginal virgin obscene erotic orgasm genital anal abortion""".split())
# Closed-class words that the inflection tables also list as nouns, verbs, adjectives or adverbs
# ("out", "about", "over"): the grammar has its own closed classes, so they stay out of the open ones.
CLOSED = set("""about above across after again against ago ahead all almost alone along already also although
always among another any anybody anyone anything anyway anywhere apart around aside away back before behind
below beneath beside besides being between beyond both but down during each even either else enough ever every everybody
everyone everything everywhere except few first for forth from further here hence how however inside instead
into just last least less like little many may maybe might more most much must near neither never next none
nobody nor not nothing now nowhere off often once one only onto other others otherwise out outside over own
past per perhaps plus quite rather round same second several since some somebody someone something sometimes
somewhat somewhere soon still such than that then there therefore these thing those though through throughout
thus till together too toward towards under underneath unless unlike until upon very well what whatever when
whenever where wherever whether which while who whole whom whose why with within without yet yes okay anti
mid super extra pretty sure real very two three four five six seven eight nine ten hundred thousand""".split())


def _core() -> dict[str, list[str]]:
    out = {"noun": [], "verb": [], "adj": [], "adv": []}
    for t in (*TOPICS.values(), GENERAL):
        out["noun"] += t["agents"].split() + t["things"].split()
        out["verb"] += list(t["verbs"])
        out["adj"] += t["adjectives"].split()
        out["adv"] += t["adverbs"].split()
    return out


def main() -> None:
    import lemminflect
    import names as census
    import spacy_lookups_data

    prob = json.load(gzip.open(Path(spacy_lookups_data.__file__).parent / "data" / "en_lexeme_prob.json.gz"))
    lp = lambda w: prob.get(w, -99.0)  # noqa: E731
    table = Path(lemminflect.__file__).parent / "resources" / "infl_lu.csv.gz"
    classes: dict[str, set[str]] = {}
    participles = set()  # past tenses, past and present participles ("based", "going")
    with gzip.open(table, "rt") as f:
        for row in csv.reader(f):
            if row[1] in ("noun", "verb", "adj", "adv") and WORD.fullmatch(row[0]):
                classes.setdefault(row[0], set()).add(row[1])
            if row[1] == "verb":
                participles |= {x for part in row[2:5] for x in part.split("/") if x}

    def forms(w: str, c: str, core: bool = False):
        """The forms of lemma w in class c, or None when it has no usable ones. A core word missing
        from the tables gets LemmInflect's rules for unlisted words."""
        def table(upos):
            i = lemminflect.getAllInflections(w, upos=upos)
            return i or (lemminflect.getAllInflectionsOOV(w, upos=upos) if core else {})
        if c == "noun":
            pl = [p for p in table("NOUN").get("NNS", ()) if p != w]
            return (pl[0],) if pl else None
        if c == "verb":
            i = table("VERB")
            z, d = i.get("VBZ", (None,))[0], i.get("VBD", (None,))[0]
            return (z, d) if z and d and w not in (z, d) else None
        return ()

    def usable(w: str, c: str, fs) -> bool:
        """A tail word: no closed-class, blocked or participle word; a noun whose plural is in use
        (not 'informations'); a verb whose past tense is (not 'evened'); an adverb in -ly, which
        reads well where the grammar puts adverbs, after the object."""
        if (fs is None or w in BLOCKED | CLOSED or lp(w) <= -99 or lp(w) < lp(w.capitalize())
                or not all(WORD.fullmatch(x) and lp(x) > -99 and x not in BLOCKED for x in fs)):
            return False
        if c == "noun":
            return w not in participles and lp(fs[0]) >= lp(w) - 3.5
        if c == "verb":
            return lp(fs[1]) >= lp(w) - 5.0
        if c == "adj":
            return w not in participles
        return w.endswith("ly")

    def pick(w: str) -> str | None:
        """The one class of a lemma listed under several."""
        cand = {c: forms(w, c) for c in classes[w]}
        cand = {c: fs for c, fs in cand.items() if usable(w, c, fs)}
        if "verb" in cand and ("noun" not in cand or lp(cand["verb"][1]) > lp(cand["noun"][0])):
            return "verb"
        if "noun" in cand and ("adj" not in cand or lp(cand["noun"][0]) > lp(w) - 2.0):
            return "noun"
        return next((c for c in ("adj", "adv", "noun") if c in cand), None)

    taken = set(KEYS) | set(VALUES)
    rows, errors = [], []
    for c, ws in _core().items():  # the core first, in the class the topics give it
        for w in ws:
            fs = forms(w, c, core=True)
            if fs is None or not WORD.fullmatch(w):
                errors.append(f"the core word {w!r} has no {c} forms in the inflection tables")
                continue
            clash = {w, *fs} & taken
            if clash:
                errors.append(f"the core {c} {w!r} shares the forms {sorted(clash)} with another word")
            taken |= {w, *fs}
            rows.append((c, w, fs, lp(w)))
    if errors:
        raise ValueError("Fix topics.py: " + "; ".join(errors) + ".")
    count = {c: 0 for c in KEEP}
    for w in sorted(classes, key=lambda w: (-lp(w), w)):
        if w in taken or lp(w) <= -99:
            continue
        c = pick(w)
        if c is None or count[c] >= KEEP[c]:
            continue
        fs = forms(w, c)
        if {w, *fs} & taken:
            continue
        taken |= {w, *fs}
        count[c] += 1
        rows.append((c, w, fs, lp(w)))
    header = ("# The English words of the embedded corpus: class, lemma, forms (noun: plural; verb: third person "
              "singular, past), log frequency.\n# Derived by lmcourse/corpora/derive_words.py from LemmInflect 0.2.3 "
              "(MIT licence; inflections from the NIH SPECIALIST Lexicon)\n# and spaCy's lexeme_prob table in "
              "spacy-lookups-data 1.0.5 (MIT licence). The first rows are the core words of topics.py.\n")
    lines = "".join(f"{c}\t{w}\t{','.join(fs)}\t{p:.2f}\n" for c, w, fs, p in rows)
    atomic_write(HERE / "english.tsv", header + lines)

    english = set(classes)
    with gzip.open(table, "rt") as f:
        for row in csv.reader(f):
            english |= {x for part in row[2:] for x in part.split("/")}
    folder = Path(census.__file__).parent

    def read(*files):
        pct: dict[str, float] = {}
        for fn in files:
            for line in open(folder / fn):
                name, p = line.split()[:2]
                name = name.lower()
                pct[name] = max(pct.get(name, 0.0), float(p) / len(files))
        keep = [n for n in sorted(pct, key=lambda n: (-pct[n], n))
                if WORD.fullmatch(n) and n not in english and n not in BLOCKED and lp(n) <= lp(n.capitalize())]
        return [(n, pct[n]) for n in keep]

    last = read("dist.all.last")[:N_SURNAMES]
    first = read("dist.male.first", "dist.female.first")[:N_FIRST]
    header = ("# Names of the embedded corpus: kind (last or first name), name, percent of the population.\n"
              "# From the US Census Bureau's 1990 name lists (public domain), as shipped in the names package "
              "0.3.0 (MIT licence);\n# derived by lmcourse/corpora/derive_words.py, leaving out names that are "
              "also English words.\n")
    lines = "".join(f"{kind}\t{n}\t{p:.3f}\n" for kind, ns in (("last", last), ("first", first)) for n, p in ns)
    atomic_write(HERE / "names.tsv", header + lines)
    print(f"english.tsv: {len(rows)} lemmas {count}; names.tsv: {len(last)} surnames, {len(first)} first names")


if __name__ == "__main__":
    main()
