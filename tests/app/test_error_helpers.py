"""The two checks every edge shares (``app.errors``): which request field an unknown model's
message names, and a collection that is no name. The facade and the HTTP routes both use them
(their parity is tested through the edges in ``test_facade_parity.py``)."""

from __future__ import annotations

import pytest

from app.errors import InvalidRequestError, check_collection, quoted_field


def test_the_field_whose_name_the_message_quotes_is_named():
    fields = {"embedder": "minilm", "rerank": "nope"}
    assert quoted_field("unknown embedder 'nope': valid names ...", fields) == "rerank"


def test_no_field_is_named_where_none_or_several_are_quoted():
    assert quoted_field("unknown embedder 'x'", {"embedder": "minilm", "rerank": "y"}) is None
    both = {"embedder": "same", "explainer": "same"}
    assert quoted_field("unknown embedder 'same'", both) is None


def test_the_only_field_given_is_named_when_asked():
    fields = {"embedder": "minilm[max_length=9]", "rerank": None, "explainer": ""}
    assert quoted_field("an option it does not offer", fields) is None
    assert quoted_field("an option it does not offer", fields, only_given=True) == "embedder"
    assert quoted_field("x", {"embedder": "a", "rerank": "b"}, only_given=True) is None


@pytest.mark.parametrize("name", ["", "  ", "café", "a/b", "-x"])
def test_a_collection_that_is_no_name_is_refused_naming_its_field(name):
    with pytest.raises(InvalidRequestError) as raised:
        check_collection(name, param="c")
    assert raised.value.param == "c"
    assert "invalid collection name" in str(raised.value) or "empty" in str(raised.value)


def test_an_optional_collection_left_empty_says_so():
    with pytest.raises(InvalidRequestError, match="collection is empty") as raised:
        check_collection(" ", optional=True, param=None)
    assert raised.value.param is None


@pytest.mark.parametrize("name", ["notes", "my-notes_2", None, 3])
def test_a_name_and_other_types_pass(name):
    check_collection(name)  # other types are their callers' type checks


def test_an_error_said_again_keeps_its_class_field_and_wait():
    """``reworded``: "index job N could not be started: ..." of a broker out of reach was
    ``type(e)(message)``, which dropped the error's ``retry_after_s`` (the 503's Retry-After)
    and its ``param``."""
    from app.errors import BusyError, UnavailableError, reworded

    outage = UnavailableError("cannot reach the broker", retry_after_s=5.0, param="source")
    again = reworded(outage, "index job 3 could not be started: cannot reach the broker")
    assert type(again) is UnavailableError and str(again).startswith("index job 3 could not")
    assert (again.retry_after_s, again.param) == (5.0, "source")
    assert str(outage) == "cannot reach the broker"  # the original is left as it was
    busy = reworded(BusyError("queue full", 12.0), "queue full, again")
    assert (type(busy), busy.retry_after_s, str(busy)) == (BusyError, 12.0, "queue full, again")
    assert reworded(UnavailableError("no extra"), "said").retry_after_s is None
