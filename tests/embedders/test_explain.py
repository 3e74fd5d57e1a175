"""Cluster explanations: TF-IDF keywords of the members' answers and representative members."""

from __future__ import annotations

import numpy as np
import pytest

from embedders.explain import (
    ClusterExplanation,
    answer_terms,
    explain_clusters,
    explain_with_inbedder,
    fold_plurals,
    keyword_terms,
)

TEXTS = [
    "Where is my new card? It has not arrived.",
    "My card still hasn't come in the post.",
    "How long does card delivery take?",
    "I want my money back for this order.",
    "Please refund the duplicate charge.",
    "Can I get a refund for the cancelled flight?",
]
LABELS = [0, 0, 0, 1, 1, 1]
ANSWERS = ["card arrival", "card arrival post", "card arrival time", "refund money", "refund", "refund flight"]


def test_keywords_and_representatives_without_embeddings():
    out = explain_clusters(TEXTS, LABELS, ANSWERS, top_k=2, members=2)
    assert [e.cluster for e in out] == [0, 1]
    assert [e.size for e in out] == [3, 3]
    assert out[0].keywords == ["arrival", "card"]  # equal scores: alphabetical
    assert out[1].keywords == ["refund", "flight"]  # "flight" and "money" tie: alphabetical
    # Members whose answers hold the most keywords; ties keep the input order.
    assert out[0].representative_indices == [0, 1]
    assert out[0].representatives == TEXTS[:2]
    assert out[1].representative_indices == [5, 3]  # "refund flight" holds both keywords
    assert all(isinstance(e, ClusterExplanation) for e in out)


def test_words_every_cluster_uses_rank_below_distinctive_ones():
    answers = ["card problem", "card problem", "refund problem", "refund problem"]
    out = explain_clusters(TEXTS[:4], [0, 0, 1, 1], answers, top_k=2)
    assert out[0].keywords == ["card", "problem"]
    assert out[1].keywords == ["refund", "problem"]


def test_a_word_every_member_uses_comes_after_every_distinctive_word():
    # "feel" is in every text of both clusters; TF-IDF with smoothed IDF ranked it first.
    texts = ["i feel happy today", "i feel so joyful and glad", "i feel great",
             "i feel sad", "i feel lonely and sad tonight", "i feel down"]
    out = explain_clusters(texts, [0, 0, 0, 1, 1, 1], texts, top_k=3)
    assert "feel" not in out[0].keywords[:3] and "feel" not in out[1].keywords[:3]
    assert out[1].keywords[0] == "sad"  # two of three members use it
    assert explain_clusters(texts, [0, 0, 0, 1, 1, 1], texts, top_k=10)[0].keywords[-1] == "feel"


def test_a_word_rarer_in_a_cluster_than_elsewhere_is_not_its_keyword():
    answers = ["card", "card", "card refund", "refund", "refund", "refund"]
    out = explain_clusters(TEXTS, LABELS, answers, top_k=5)
    assert out[0].keywords == ["card"]
    assert out[1].keywords == ["refund"]


def test_contractions_and_numbers_are_not_keywords_but_generic_stop_words_can_be():
    texts = ["My card hasn't arrived", "It hasn't come and I didn't get it, im worried",
             "Why didn't my top up work", "My top up didn't go through &#39;39"]
    out = explain_clusters(texts, [0, 0, 1, 1], texts, top_k=10)
    words = {w for e in out for w in e.keywords}
    assert not words & {"hasn", "didn", "im", "39", "t"}
    # "top" is in scikit-learn's English stop list, as "bill" and "interest"; "up" is a
    # particle: joined to the word before it, it was dropped and "top up" read as "top".
    assert out[1].keywords[0] == "top up"
    bills = explain_clusters(["bill", "interest"], [0, 1], ["my bill", "the interest"])
    assert [e.keywords for e in bills] == [["bill"], ["interest"]]
    assert explain_clusters(["the bank's fee"] * 2, [0, 1], ["the bank's fee", "x"])[0].keywords == ["bank", "fee"]


def test_texts_without_spaces_are_named_by_the_character_pairs_they_share():
    """A Chinese clause is one ``\\w+`` word that no other member uses: every score tied and
    the alphabetical tie-break named the clusters by whole clauses."""
    pandas = ["熊猫最喜欢吃竹子", "一只成年熊猫一天可以吃掉十几公斤竹子", "大熊猫是中国的国宝"]
    wall = ["长城是古代修建的防御工程", "长城全长两万多公里", "每年有很多游客去北京爬长城"]
    out = explain_clusters(pandas + wall, [0, 0, 0, 1, 1, 1], pandas + wall, top_k=3)
    assert out[0].keywords[:2] == ["熊猫", "竹子"]  # all three members, then two of them
    assert out[1].keywords[0] == "长城"
    # Thai, its vowel signs and tone marks kept with their letters; Japanese kana with kanji.
    thai = ["ฝนตกหนักวันนี้", "วันนี้ฝนตกอีกแล้ว", "แมวนอนบนโซฟา", "แมวชอบกินปลา"]
    rain, cat = explain_clusters(thai, [0, 0, 1, 1], thai, top_k=10)
    assert {"ฝน", "ตก", "วัน"} <= set(rain.keywords[:5])  # ฝนตก: it rains; วันนี้: today
    assert set(cat.keywords[:2]) == {"แม", "มว"}  # แมว: cat
    japanese = ["東京タワーに行った", "東京タワーは高い", "富士山に登った", "富士山がきれい"]
    tower, fuji = explain_clusters(japanese, [0, 0, 1, 1], japanese)
    assert {"東京", "タワ"} <= set(tower.keywords) and {"富士", "士山"} <= set(fuji.keywords)


def test_stopwords_are_never_keywords():
    answers = ["the card is about arrival", "what about the card", "it is a refund", "refund for you"]
    out = explain_clusters(TEXTS[:4], [5, 5, 9, 9], answers, top_k=10)
    assert [e.cluster for e in out] == [5, 9]
    assert set(out[0].keywords) == {"card", "arrival"}
    assert out[1].keywords == ["refund"]


def test_representatives_are_nearest_the_centroid_with_embeddings():
    emb = np.array([[1.0, 0.0], [0.0, 1.0], [0.9, 0.1], [1.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    out = explain_clusters(TEXTS, LABELS, ANSWERS, embeddings=emb, members=1)
    assert out[0].representative_indices == [2]  # (0.9, 0.1) is nearest the cluster's mean direction
    assert out[1].representative_indices == [3]
    assert out[1].representatives == [TEXTS[3]]


def test_answers_without_content_words_give_empty_keywords():
    out = explain_clusters(TEXTS[:2], [0, 1], ["the", ""])
    assert [e.keywords for e in out] == [[], []]
    assert [e.representatives for e in out] == [[TEXTS[0]], [TEXTS[1]]]


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"texts": [], "labels": [], "answers": []}, "at least one text"),
        ({"labels": [0, 1]}, "texts and labels must have the same length, got 6 texts and 2 labels"),
        ({"answers": ["a"]}, "texts and answers must have the same length, got 6 texts and 1 answers"),
        ({"answers": ["a", "b", "c", "d", "e", None]}, r"answers\[5\] is NoneType"),
        ({"labels": [0, 0, 0, 1, 1, 1.5]}, "integer cluster ids, got 1.5"),
        ({"labels": [0, 0, 0, 1, 1, "x"]}, "integer cluster ids"),
        ({"top_k": 0}, "top_k must be a positive integer"),
        ({"members": 0}, "members must be a positive integer"),
        ({"embeddings": np.zeros((5, 2))}, r"embeddings must have shape \(6, dim\)"),
        ({"embeddings": np.full((6, 2), np.nan)}, "NaN"),
    ],
)
def test_bad_inputs_raise_value_error(kwargs, fragment):
    args = {"texts": TEXTS, "labels": LABELS, "answers": ANSWERS, **kwargs}
    with pytest.raises(ValueError, match=fragment):
        explain_clusters(**args)


class _FakeInBedder:
    """Answers from a lookup table, recording how it was called."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], str | None]] = []

    def generate_answers(self, texts, instruction, max_new_tokens=None, batch_size=16):
        self.calls.append((list(texts), instruction))
        return [ANSWERS[TEXTS.index(t)] for t in texts]


def test_explain_with_inbedder_generates_then_explains():
    fake = _FakeInBedder()
    out = explain_with_inbedder(fake, TEXTS, LABELS, "What does the customer want?", top_k=1)
    assert fake.calls == [(TEXTS, "What does the customer want?")]
    assert [e.keywords for e in out] == [["arrival"], ["refund"]]


def test_explain_with_inbedder_checks_before_generating():
    fake = _FakeInBedder()
    with pytest.raises(ValueError, match="same length"):
        explain_with_inbedder(fake, TEXTS, [0], "q")
    assert fake.calls == []


def test_a_particle_joins_the_word_before_it_and_plurals_count_with_their_singular():
    """The exploration's Banking77 names: "top / denied / app" for failed top-ups, and
    "exchange / rates / rate" (two of three name slots for one word)."""
    assert keyword_terms("I can't top up; log-out, then it's up") == ["top up", "log out"]
    assert keyword_terms("up and down") == []  # a particle alone says nothing
    # Not across a sentence or a clause: "money out", "card up" were keywords.
    assert keyword_terms("Where is my money? Out of nowhere") == ["money", "nowhere"]
    assert keyword_terms("I lost my card. Up to now, top-up") == ["lost", "card", "top up"]
    texts = ["what are the exchange rates", "exchange rate today", "is the rate fair",
             "refund please", "I want refunds", "refund not received"]
    out = explain_clusters(texts, [0, 0, 0, 1, 1, 1], texts, top_k=3)
    assert out[0].keywords[:2] == ["rate", "exchange"]  # three members, in the commoner form
    assert out[1].keywords[0] == "refund"
    # A plural without its singular, or one that is not a plural in meaning, stays.
    assert fold_plurals([["news"], ["new"], ["calories"]]) == [["news"], ["new"], ["calories"]]
    assert fold_plurals([["deliveries"], ["delivery"], ["deliveries"]]) == [["deliveries"]] * 3


def test_a_phrasal_verbs_plural_past_and_one_word_forms_are_the_phrase():
    """Banking77's failed top-ups: "my top-ups failed" gave "top / ups / failed", and "topped
    up", "topup" were not "top up" (26 of 360 top-up texts say "top-ups"/"top ups", 12 "topped up")."""
    assert keyword_terms("my top-ups failed") == ["top up", "failed"]
    assert keyword_terms("two top ups, then logouts") == ["two", "top up", "logouts"]
    # A doubled consonant's past or -ing form is its verb (English doubles only after a short vowel).
    assert keyword_terms("I topped up, then logging out, setting up") == ["top up", "log out", "set up"]
    # Not where the base may end in the doubled letter ("added" is "add"), nor a word alone.
    assert keyword_terms("added up, called off, topped") == ["added up", "called off", "topped"]
    # Across the texts, a form of a phrase some text holds is that phrase; none is made up.
    texts = ["topup failed", "top-up please", "my topups", "cashed out", "cash out limit", "log-out",
             "logouts", "tops up", "breakdown", "signing up"]
    assert answer_terms(texts) == [["top up", "failed"], ["top up", "please"], ["top up"], ["cash out"],
                                   ["cash out", "limit"], ["log out"], ["log out"], ["top up"], ["breakdown"],
                                   ["signing up"]]
    assert fold_plurals([keyword_terms(t) for t in texts]) == answer_terms(texts)  # the same batch folds
    pair = [*texts[:3], "refund please", "refund late", "refunds"]
    out = explain_clusters(pair, [0] * 3 + [1] * 3, pair, top_k=1)
    assert [c.keywords for c in out] == [["top up"], ["refund"]]


def test_numbers_keep_their_unit_one_letter_prefixes_their_word_and_backticks_are_apostrophes():
    """"2.4GHz" gave "4ghz", "e-mail" gave "mail", and "didn`t" left "didn"."""
    assert keyword_terms("2.4GHz wifi or 5GHz, 3.5mm jack") == ["2.4ghz", "wifi", "5ghz", "3.5mm", "jack"]
    assert keyword_terms("version 2.4, 1,000 users") == ["version", "users"]  # a number alone is none
    assert keyword_terms("my e-mail, an x-ray, a t-shirt") == ["e-mail", "x-ray", "t-shirt"]
    assert keyword_terms("top-up and well-known") == ["top up", "well", "known"]  # longer parts as before
    assert keyword_terms("it didn`t work, i didn´t pay") == ["work", "pay"]


def test_underscores_are_no_letters_but_join_the_parts_of_a_name():
    """A form's blanks and Markdown's emphasis were keywords and cluster names
    ("________ / account / code", "_really_ / refund / _asap_"): ``\\w`` holds the underscore."""
    assert keyword_terms("Name: ________ Date: ________") == ["name", "date"]
    assert keyword_terms("please reply _asap_, I _really_ need a __refund__") == [
        "please", "reply", "asap", "really", "need", "refund"]
    assert keyword_terms("the user_id field and snake_case names") == ["user_id", "field", "snake_case", "names"]
    labels = [0, 0, 1, 1]
    texts = ["Name: ________ account ________", "Name: ________ account number ________",
             "_asap_ refund please", "refund _asap_ now"]
    names = [c.keywords for c in explain_clusters(texts, labels, texts)]  # named from the texts
    assert not any("_" in word for words in names for word in words), names


def test_german_italian_and_portuguese_possessives_and_have_are_not_keywords():
    # "carte / karte / meine" named a cluster, with "habe" among its keywords.
    for text, words in [("Ich habe meine Karte verloren", ["karte", "verloren"]),
                        ("Ho perso la mia carta", ["perso", "carta"]),
                        ("Eu tenho o meu cartão", ["cartão"])]:
        assert keyword_terms(text) == words


def test_forms_of_be_and_stressed_pronouns_are_not_keywords():
    # A review's Spanish, Portuguese and French texts: "estoy", "estou", "êtes", "moi" were keywords.
    assert keyword_terms("estoy muy cansado, estou cansada, vous êtes fatigué, moi aussi, "
                         "tu sei stanco, du bist müde") == ["cansado", "cansada", "fatigué", "stanco", "müde"]
    assert keyword_terms("my son is a student") == ["son", "student"]  # an English word stays
