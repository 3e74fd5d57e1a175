"""Cluster explanations from InBedder answers.

InBedder answers the clustering instruction about every member in a few content
words ("card arrival", "refund"). Those answers name what a cluster has in common
far better than the raw texts do, so a cluster is explained by:

* keywords: the content words a cluster's members use more than the whole set does.
  A word's score in cluster c is ``p(w|c) * log(p(w|c) / p(w))``, the share of c's members
  whose answer holds it times the log of how much more common it is in c than overall (its
  term in the KL divergence of c's word use from the set's). A word every cluster uses
  evenly scores 0 and comes after every distinctive word; a word rarer in c than elsewhere
  is never c's keyword. Words are read folded as lexical search reads them (``scripts.fold``:
  composed, full-width as ASCII, "İzmir" as "izmir", "ß" as "ss", without Arabic harakat or
  Hebrew niqqud), with their other combining marks (Hindi, Bengali); French and Italian
  elisions are cut ("l'économie" -> "économie"), a Turkish proper noun's case suffix too
  ("İstanbul'da" -> "istanbul"), and other words with an apostrophe are kept ("o'brien").
  Function words of English, French, German, Spanish, Italian and
  Portuguese and contractions ("didn't", "im") are dropped, but not content words that
  generic stop lists hold ("bill", "interest"); an English particle right after a kept word
  is joined to it ("top up", "log out", "cut off": "top up" was read as "top"), with a
  particle's plural ("top-ups", "top ups") and a verb's doubled past or -ing form ("topped up",
  "logging out") read as the phrase; across the texts, another form of a phrase some text holds
  is that phrase ("topup", "cashed out" with "top up", "cash out"); a decimal number keeps its
  unit ("2.4ghz") and a one-letter first part its word ("e-mail"); and a plural
  is counted with its singular where the texts hold both ("rates" with "rate", shown in the
  form more members use: "exchange / rates / rate" spent two of three name slots). Scripts
  written without spaces between words (Chinese, Japanese, Korean, Thai, Lao, Khmer, Burmese)
  are cut into overlapping character pairs ("熊猫吃竹子" -> 熊猫, 猫吃, 吃竹, 竹子), as
  search engines index them without a dictionary: split at non-word characters, a whole
  clause is one "word" that no other member uses, and such clauses named the clusters;
* representatives: the members closest to the cluster centroid (cosine) when
  embeddings are given, else the members whose answers contain the most keywords.

``explain_clusters`` works on answers from anywhere; ``explain_with_inbedder``
generates them first.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from embedders.scripts import UNSPACED, combining_marks, fold, pairs
from embedders.training.instruct_data import STOPWORDS


@dataclass
class ClusterExplanation:
    """What one cluster is about.

    Attributes:
        cluster: the cluster label.
        size: number of members.
        keywords: the members' answers' most distinctive words, best first (fewer than
            ``top_k`` when the answers hold fewer distinct content words).
        representatives: member texts that show the cluster best, best first.
        representative_indices: positions of those members in the input lists.
    """

    cluster: int
    size: int
    keywords: list[str]
    representatives: list[str]
    representative_indices: list[int]


@runtime_checkable
class AnswerGenerator(Protocol):
    """What ``explain_with_inbedder`` needs from a model (``InBedderEmbedder`` has it)."""

    def generate_answers(self, texts: Sequence[str], instruction: str | None, max_new_tokens: int | None = None,
                         batch_size: int = 16) -> list[str]: ...


# Contractions typed without their apostrophe, as short texts often are ("im", "dont"): as
# little content as the function words they stand for. ("id" and "ill" stay: ID, ill.)
_BARE_CONTRACTIONS = frozenset((
    "im", "ive", "dont", "didnt", "doesnt", "cant", "wont", "isnt", "wasnt", "arent", "werent",
    "havent", "hasnt", "hadnt", "couldnt", "wouldnt", "shouldnt", "youre", "youve", "theyre",
    "thats", "whats", "theres",
))
# The commonest function words of French, German, Spanish, Italian and Portuguese (articles,
# pronouns, prepositions, conjunctions, forms of "be" and "have"), dropped from every text as the
# English ones are: "le / la / et" named clusters. Words that are also English content words
# are left out ("son", "car", "ton", "war", "hat", "bin", "era", "dove", "man", "sin").
_FOREIGN_STOP_WORDS = frozenset((
    # French
    "le", "la", "les", "un", "une", "des", "du", "de", "et", "ou", "au", "aux", "en", "dans",
    "par", "pour", "sur", "avec", "sans", "sous", "ce", "cet", "cette", "ces", "il", "ils", "elle",
    "elles", "nous", "vous", "je", "tu", "qui", "que", "quoi", "où", "mais", "donc", "ni", "ne",
    "pas", "plus", "est", "sont", "été", "être", "avoir", "ont", "se", "sa", "ses", "leur", "leurs",
    "mon", "ma", "mes", "ta", "tes", "notre", "nos", "votre", "vos", "très", "tout", "tous",
    "toute", "toutes", "comme", "aussi", "même", "si", "lui", "cela", "ça", "était", "fait",
    # German
    "der", "die", "das", "den", "dem", "des", "ein", "eine", "einer", "eines", "einem", "einen",
    "und", "oder", "aber", "ist", "sind", "wird", "werden", "wurde", "haben", "hatte", "nicht",
    "auf", "aus", "bei", "mit", "nach", "von", "vom", "zu", "zum", "zur", "für", "über", "unter",
    "vor", "im", "ins", "um", "durch", "gegen", "ohne", "es", "er", "sie", "wir", "ihr", "ich",
    "du", "sich", "dass", "noch", "nur", "auch", "wie", "als", "wenn", "sehr", "kann", "mehr",
    "sein", "seine", "ihre", "dies", "diese", "dieser", "beim", "schon", "doch",
    # Spanish
    "el", "los", "las", "una", "unos", "unas", "del", "al", "con", "por", "para", "sobre", "entre",
    "qué", "como", "cómo", "es", "fue", "ser", "está", "están", "estar", "ha", "han", "hay",
    "lo", "le", "les", "te", "mi", "mis", "tu", "tus", "yo", "él", "ella", "ellos", "ellas",
    "este", "esta", "estos", "estas", "ese", "esa", "eso", "esto", "pero", "más", "muy", "ya",
    "también", "cuando", "donde", "porque", "sí", "todo", "todos", "sus", "su", "otro", "otra",
    # Italian
    "il", "lo", "gli", "uno", "di", "della", "dei", "degli", "delle", "dello", "alla", "ai",
    "agli", "alle", "da", "dal", "dalla", "nel", "nella", "nei", "nelle", "su", "sul", "sulla",
    "per", "tra", "fra", "ed", "che", "non", "sono", "hanno", "essere", "ci", "mi", "ti", "vi",
    "ne", "ma", "più", "anche", "questo", "questa", "quello", "quella", "suo", "sua", "loro",
    "molto", "come", "dell", "nell", "all", "dall", "sull",
    # Portuguese
    "os", "as", "um", "uma", "uns", "umas", "do", "da", "dos", "das", "em", "no", "na", "nos",
    "nas", "pelo", "pela", "pelos", "pelas", "com", "sem", "não", "são", "foi", "tem", "há",
    "seu", "sua", "seus", "suas", "ele", "ela", "eles", "elas", "eu", "você", "nós", "isso",
    "isto", "esse", "essa", "mas", "mais", "muito", "quando", "onde", "já", "ao", "aos", "às",
    "num", "numa", "também", "ter",
    # Possessives and forms of "have" each language's list lacked ("habe / meine" named a
    # cluster of German texts); "hat" and "bin" stay out (English words)
    "mein", "meine", "meinen", "meinem", "meiner", "dein", "deine", "kein", "keine", "keinen",
    "habe", "hast", "ho", "hai", "mio", "mia", "miei", "mie", "tuo", "tua", "meu", "minha",
    "meus", "minhas", "teu", "tenho", "suis", "avons", "avez", "sommes", "hemos", "tengo",
    "tiene",
    # Forms of "be" and the pronouns a review found as keywords ("estoy", "estou", "êtes",
    # "moi"); "es" and "est" were there already
    "estoy", "estás", "estamos", "soy", "eres", "somos", "estou", "estão", "sou", "êtes",
    "moi", "toi", "sei", "siamo", "siete", "bist", "seid",
))
# Articles, English and those of the languages above (all of them stop words), and the elided
# "l'": a wording of an answer that starts with one is shown only where none of the wordings
# counted with it starts without one ("card" rather than "the card": the cluster service's
# ``_name_clusters``).
ARTICLES = frozenset((
    "a", "an", "the",
    "le", "la", "les", "l", "un", "une", "des",  # French
    "der", "die", "das", "den", "dem", "ein", "eine", "einen", "einem", "einer",  # German
    "el", "los", "las", "una", "unos", "unas",  # Spanish
    "il", "lo", "gli", "uno",  # Italian
    "os", "as", "um", "uma", "uns", "umas",  # Portuguese
))
_PHRASE_GAP = re.compile(r"[\s-]*")
# A number, whole or decimal ("2.4", "1,000"): no keyword alone ("2.4ghz" is one).
_NUMBER = re.compile(r"[\d.,]+")
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "`": "'", "\u00b4": "'", "\u02bc": "'"})
# A verb's past or -ing form with its last consonant doubled ("topped", "logging", "setting",
# "summed"): English doubles a final consonant only after a short stressed vowel, so cutting
# the ending and one of the two letters gives the verb ("top", "log", "set", "sum"). Only
# letters no common base word ends doubled with (b g m n p t: "ebb", "egg", "inn", "butt" are
# the few, and too short or too rare before a particle); "added", "called", "passed" keep
# theirs ("add", "call", "pass"), so the rule is not used for d, l, s, f, z, r.
_DOUBLED = re.compile(r"([a-z]*[aeiou])([bgmnpt])\2(?:ed|ing)")
# English particles that make a phrasal verb with the word before them ("top up", "log out",
# "cut off", "break down"): stop words alone, joined to a kept word right before them.
PARTICLES = frozenset(("up", "out", "off", "down"))
# Plurals that are not their singular plus "s" in meaning ("news" is not "new").
_NOT_PLURALS = frozenset(("news", "goods", "means", "series", "species", "physics", "politics",
                          "economics", "mathematics", "glasses", "arms", "clothes", "basics"))
KEYWORD_STOP_WORDS = (STOPWORDS | _BARE_CONTRACTIONS | _FOREIGN_STOP_WORDS
                       | frozenset(("also", "may", "might", "must", "us")))
# French and Italian elisions: the article, pronoun or preposition cut before a vowel ("l'économie",
# "qu'il", "dell'anno"); the word after it is the word. Other apostrophes ("don't") keep a word
# whole, and such a word is a contraction, dropped as before.
_ELISIONS = ("l'", "d'", "j'", "m'", "n'", "s'", "t'", "c'", "qu'", "jusqu'", "lorsqu'", "puisqu'",
             "quoiqu'", "un'", "dell'", "nell'", "all'", "dall'", "sull'", "quell'")


# English contractions after an apostrophe ("'s" and "n't" aside): the word before it is read.
_CONTRACTED = frozenset(("re", "ve", "ll", "d", "m"))
# A Turkish case, possessive or plural suffix, as written after an apostrophe that ends a proper
# noun ("'da", "'ya", "'nin", "'dan", "'daki", "'ların", "'unda"): a buffer letter, the
# harmonising vowels and consonants of those endings, one after another. A French or Irish word
# after an apostrophe ("hui", "brien", "neill") is none of them.
_TURKISH_SUFFIX = re.compile(
    r"(?:[nys]?(?:[ıiuü]n|[ıiuü]|[ae])|[dt][ae]n?|l[ae]r|[ıiuü][mz]|yl[ae]|l[ae]|ki"
    r"|[dt][ıiuü]r|[cç][ae])+")


@functools.cache
def _token() -> re.Pattern[str]:
    """A run of ``UNSPACED`` text, or a word: a letter or digit, then letters, digits and
    combining marks (``\\w`` has no marks, so Hindi "दिल्ली" was cut to pieces and Bengali gave
    nothing), parts joined by apostrophes. An underscore joins two parts ("user_id") but is no
    letter (``\\w`` holds it): a form's blanks "________" and Markdown's "_asap_" were keywords
    and cluster names. Built on first use (the marks' class takes ~50 ms)."""
    letter = rf"[^\W_{UNSPACED}]"
    word = rf"{letter}(?:{letter}|[{combining_marks()}]|_+(?={letter}))*"
    # A decimal number stays with the unit after it ("2.4ghz" was "4ghz"), and a hyphenated
    # word whose first part is one letter is one word ("e-mail", "x-ray", "t-shirt": "e-mail"
    # was "mail"); a match starts where the last one ended or after a non-word character, so
    # the letter is a whole part ("top-up" is still "top", "up").
    number = r"(?:\d+[.,](?=\d))*"
    one_letter = rf"(?:[^\W\d_{UNSPACED}]-(?={letter}))?"
    return re.compile(rf"([{UNSPACED}]+)|({number}{one_letter}{word}(?:'{word})*)")


def _without_elision(word: str) -> str:
    """``word`` without a leading elision ("l'économie" -> "économie"); as given otherwise."""
    for elision in _ELISIONS:
        if word.startswith(elision) and len(word) > len(elision):
            return word[len(elision):]
    return word


def _apostrophe_word(word: str) -> str:
    """The keyword of a word with an apostrophe, "" for none: an English contraction's word
    before it ("you're" -> "you", a stop word, as "it's" is; "n't", "didn't", is none at all), a
    possessive's owner ("bank's" -> "bank", "o'brien's" -> "o'brien"), a Turkish proper noun
    without its case suffix ("istanbul'da", "ankara'ya", "türkiye'nin" -> "istanbul", "ankara",
    "türkiye": a cluster of texts saying "İstanbul'da", "İstanbul'a" and "İstanbul'un" has one
    name word where keeping the whole word gave three words that one text each holds); any other
    word whole ("o'brien", "aujourd'hui", "rock'n'roll"). Such words were all dropped: a cluster
    of four texts on İstanbul was named "çok / aldım / bileti"."""
    if "'" not in word:
        return word
    if word.endswith("n't"):
        return ""
    if word.endswith("'s"):
        return _apostrophe_word(word[:-2])
    head, _, tail = word.rpartition("'")
    if tail in _CONTRACTED or _TURKISH_SUFFIX.fullmatch(tail):
        return _apostrophe_word(head)
    return word


def _doubled_base(word: str) -> str:
    """The verb of a past or -ing form with a doubled consonant ("topped" -> "top",
    "logging" -> "log": ``_DOUBLED``); ``word`` itself otherwise (a base of three letters or
    more only: "egged" stays)."""
    match = _DOUBLED.fullmatch(word)
    if match is None or len(match.group(1)) + 1 < 3:
        return word
    return match.group(1) + match.group(2)


def keyword_terms(text: str) -> list[str]:
    """The candidate keywords of ``text``, in order: lower-cased words of two or more
    characters (with their combining marks, folded: ``scripts.fold``, so "café" typed as "e" plus
    an accent is one word, "İzmir" is "izmir" and "Straße" is "strasse"), without function
    words (English, French, German, Spanish, Italian,
    Portuguese), contractions (``didn't``, ``i'm``: they were split into "didn", "im"), a
    possessive's ``'s`` ("bank's" -> "bank") or an elided article ("l'économie" -> "économie"),
    a Turkish case suffix after an apostrophe ("istanbul'da" -> "istanbul": ``_apostrophe_word``);
    in scripts written without spaces (Chinese, Japanese, Korean, Thai, ...), overlapping
    character pairs. A particle after a kept word joins it ("top up"), its plural too
    ("top-ups" -> "top up"), and a doubled past or -ing form before it is its verb ("topped
    up", "logging out" -> "top up", "log out"); a decimal number keeps its unit ("2.4ghz") and
    a hyphenated word with a one-letter first part is one word ("e-mail"). Forms that only the
    other texts can tell ("topup", "cashed out") are folded by ``fold_plurals``."""
    words: list[str] = []
    # Apostrophes typed as other marks ("didn`t", "didn´t", "didn’t") are apostrophes: "didn`t"
    # left "didn" as a keyword.
    # Folded as lexical search folds words (``scripts.fold``: "İzmir" was "i̇zmir", an "i" and a
    # combining dot; "Straße" and "strasse" two keywords), the apostrophes first (NFKC makes
    # "´" a space and an accent).
    text = fold(text.translate(_APOSTROPHES)).lower()
    joinable = False  # the last word read was kept, and it was a word (not a particle's phrase)
    end = 0  # where the last token ended
    for match in _token().finditer(text):
        run, word = match.groups()
        # Only a space or a hyphen between them makes a phrase: "money? Out of nowhere" and
        # "my card. Up to now" were read as "money out" and "card up".
        joinable = joinable and _PHRASE_GAP.fullmatch(text, end, match.start()) is not None
        end = match.end()
        if run:
            words.extend(pair for pair in pairs(run) if not pair.isdigit())
            joinable = False
            continue
        word = _apostrophe_word(_without_elision(word))
        # A particle's plural is its phrase's ("top-ups", "top ups": "top up"; "ups" was a keyword).
        particle = word[:-1] if word.endswith("s") and word[:-1] in PARTICLES else word
        if particle in PARTICLES and joinable:
            words[-1] = f"{_doubled_base(words[-1])} {particle}"
            joinable = False
            continue
        joinable = not (not word or len(word) < 2 or _NUMBER.fullmatch(word) is not None
                        or word in KEYWORD_STOP_WORDS)
        if joinable:
            words.append(word)
    return words


def _verb_bases(verb: str) -> list[str]:
    """What ``verb`` may be a form of: without "-s", "-es", "-ed", "-ing" (and with an "e" or
    a "y" back: "priced" -> "price", "dried" -> "dry"), or a doubled consonant ("fizzed")."""
    bases = []
    for ending in ("ing", "ed", "es", "s"):
        if verb.endswith(ending) and len(verb) - len(ending) >= 2:
            stem = verb[:-len(ending)]
            bases += [stem, stem + "e"]
            if len(stem) > 2 and stem[-1] == stem[-2]:
                bases.append(stem[:-1])
    if verb.endswith(("ied", "ies")):
        bases.append(verb[:-3] + "y")
    return bases


def _phrase_forms(used: Counter[str]) -> dict[str, str]:
    """The terms of ``used`` that are another form of a phrase ``used`` holds, mapped to it:
    a verb's form before a particle ("cashed out", "signing up", "tops up" -> "cash out",
    "sign up", "top up") and a phrase written as one word ("topup", "topups", "logout" ->
    "top up", "log out"). Only to a phrase some text holds, so no rule can make a phrase up:
    cutting "-ed" off "need" would give "ne", and a one-word "breakdown" is "break down" only
    where a text says "break down"."""
    same: dict[str, str] = {}
    for term in used:
        if " " in term:
            verb, _, particle = term.rpartition(" ")
            if particle not in PARTICLES or " " in verb:
                continue
            found = [f"{base} {particle}" for base in _verb_bases(verb)]
        else:
            found = [f"{term[:-len(particle) - plural]} {particle}" for particle in PARTICLES
                     for plural in (0, 1)
                     if term.endswith(particle + "s" * plural) and len(term) - len(particle) - plural >= 2]
        phrase = next((f for f in found if f != term and f in used), None)
        if phrase is not None:
            same[term] = phrase
    for term, phrase in same.items():  # "loggedout" -> "logged out" -> "log out"
        seen = {term}
        while phrase in same and phrase not in seen:
            seen.add(phrase)
            phrase = same[phrase]
        same[term] = phrase
    return same


def fold_plurals(terms: list[list[str]]) -> list[list[str]]:
    """``terms`` with each plural and its singular as one word, where both occur ("rates" and
    "rate", "deliveries" and "delivery", "boxes" and "box"), in the form more texts use (the
    singular on a tie). A plural whose singular no text holds stays as it is.

    Before that, another form of a phrase that some text holds is read as that phrase
    (``_phrase_forms``: "topup", "topups", "cashed out", "tops up" with "top up" and "cash
    out"): folds across the texts, so the keywords and the counts of texts holding a name
    word (both read through ``answer_terms``) see the same words."""
    phrases = _phrase_forms(Counter(w for words in terms for w in set(words)))
    if phrases:
        terms = [[phrases.get(w, w) for w in words] for words in terms]
    used = Counter(w for words in terms for w in set(words))
    same: dict[str, str] = {}
    for word in used:
        if len(word) < 4 or word in _NOT_PLURALS or " " in word or not word.endswith("s"):
            continue
        for singular in (word[:-3] + "y" if word.endswith("ies") else "",
                         word[:-2] if word.endswith(("ches", "shes", "sses", "xes", "zes")) else "",
                         word[:-1] if not word.endswith("ss") else ""):
            if singular and singular in used:
                same[word] = singular
                break
    shown = {singular: singular for singular in same.values()}
    for plural, singular in same.items():
        if used[plural] > used[shown[singular]]:
            shown[singular] = plural
    if not same:
        return terms
    return [[shown.get(same.get(w, w), w) for w in words] for words in terms]


def answer_terms(answers: Sequence[str]) -> list[list[str]]:
    """Each answer's candidate keywords as ``explain_clusters`` reads them: ``keyword_terms``
    (particles joined, possessives and elisions cut), a plural and its singular as one word
    where both occur among ``answers``, and a phrase's other forms as the phrase where one
    answer holds it ("topup", "cashed out": ``fold_plurals``). A cluster's keywords are words of
    these lists, so a member "holds" a keyword where its list has it."""
    return fold_plurals([keyword_terms(a) for a in answers])


def _check_inputs(texts: Sequence[str], labels: Sequence[int], embeddings: Any, top_k: int,
                  members: int) -> tuple[list[int], np.ndarray | None]:
    """Validate the shared arguments; returns labels as ints and embeddings as a float array."""
    if len(texts) == 0:
        raise ValueError("explain_clusters needs at least one text; got an empty list")
    if len(labels) != len(texts):
        raise ValueError(f"texts and labels must have the same length, got {len(texts)} texts and "
                         f"{len(labels)} labels")
    for name, value in (("top_k", top_k), ("members", members)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    try:
        ids = [int(label) for label in labels]
    except (TypeError, ValueError) as e:
        raise ValueError(f"labels must be integer cluster ids: {e}") from e
    odd = [label for i, label in zip(ids, labels, strict=True) if i != label]
    if odd:
        raise ValueError(f"labels must be integer cluster ids, got {odd[0]!r}")
    matrix = None
    if embeddings is not None:
        matrix = np.asarray(embeddings, dtype=np.float64)
        if matrix.ndim != 2 or matrix.shape[0] != len(texts):
            raise ValueError(f"embeddings must have shape ({len(texts)}, dim), one row per text; "
                             f"got {matrix.shape}")
        if not np.isfinite(matrix).all():
            raise ValueError("embeddings contain NaN or infinite values")
    return ids, matrix


def explain_clusters(
    texts: Sequence[str],
    labels: Sequence[int],
    answers: Sequence[str],
    embeddings: np.ndarray | None = None,
    top_k: int = 5,
    members: int = 3,
) -> list[ClusterExplanation]:
    """Keywords and representative members for every cluster.

    Args:
        texts: the clustered texts (what representatives show).
        labels: one integer cluster id per text.
        answers: one InBedder answer per text (what keywords come from).
        embeddings: optional (n, dim) embeddings; representatives are then the members
            nearest the centroid by cosine.
        top_k: keywords per cluster.
        members: representatives per cluster.

    Returns:
        One explanation per distinct label, in increasing label order.

    Raises:
        ValueError: empty input, lengths that differ, non-integer labels, bad
            ``top_k`` / ``members``, or embeddings of the wrong shape.
    """
    ids, matrix = _check_inputs(texts, labels, embeddings, top_k, members)
    if len(answers) != len(texts):
        raise ValueError(f"texts and answers must have the same length, got {len(texts)} texts and "
                         f"{len(answers)} answers")
    bad = [i for i, a in enumerate(answers) if not isinstance(a, str)]
    if bad:
        kind = type(answers[bad[0]]).__name__
        raise ValueError(f"answers[{bad[0]}] is {kind}, not str; every answer must be a string")

    clusters = sorted(set(ids))
    member_lists = {c: [i for i, label in enumerate(ids) if label == c] for c in clusters}
    terms = answer_terms(answers)
    used_by = Counter(w for words in terms for w in set(words))  # members using each word, all clusters

    out = []
    for c in clusters:
        idx = member_lists[c]
        keywords = _keywords(idx, terms, used_by, len(ids), top_k)
        if matrix is not None:
            vectors = matrix[idx] / np.maximum(np.linalg.norm(matrix[idx], axis=1, keepdims=True), 1e-12)
            centroid = vectors.mean(axis=0)
            closeness = vectors @ (centroid / max(float(np.linalg.norm(centroid)), 1e-12))
        else:
            wanted = set(keywords)
            closeness = np.array([len(wanted & set(terms[i])) for i in idx], dtype=np.float64)
        # Stable sort: equally close members keep their input order.
        best = [idx[j] for j in np.argsort(-closeness, kind="stable")[:members]]
        out.append(ClusterExplanation(c, len(idx), keywords, [texts[i] for i in best], best))
    return out


def _keywords(members: list[int], terms: list[list[str]], used_by: Counter[str], total: int,
              top_k: int) -> list[str]:
    """The ``top_k`` words of one cluster, best first (see the module docstring): by the
    score, then by how many of its members use the word, then by how often, then
    alphabetically, so the order never depends on set or dict order."""
    here = Counter(w for i in members for w in set(terms[i]))
    uses = Counter(w for i in members for w in terms[i])
    n = len(members)
    ranked = []
    for word, count in here.items():
        share = count / n
        score = share * math.log(share / (used_by[word] / total))
        if score > -1e-12:  # a word the other clusters use more is not this one's
            ranked.append((-max(score, 0.0), -count, -uses[word], word))
    return [word for *_, word in sorted(ranked)[:top_k]]


def explain_with_inbedder(
    model: AnswerGenerator,
    texts: Sequence[str],
    labels: Sequence[int],
    instruction: str | None,
    embeddings: np.ndarray | None = None,
    top_k: int = 5,
    members: int = 3,
    max_new_tokens: int | None = None,
    batch_size: int = 16,
) -> list[ClusterExplanation]:
    """Generate InBedder answers to ``instruction`` for every text, then explain the clusters.

    The instruction should be the one the texts were clustered under, so the answers
    (and the keywords) speak to the same aspect as the clusters.

    Raises:
        ValueError: as ``explain_clusters``; checked before any answer is generated.
    """
    _check_inputs(texts, labels, embeddings, top_k, members)
    answers = model.generate_answers(texts, instruction, max_new_tokens=max_new_tokens, batch_size=batch_size)
    return explain_clusters(texts, labels, answers, embeddings=embeddings, top_k=top_k, members=members)
