"""A path starting ``~nosuchuser`` (a user this machine does not have) is kept as written, as a
shell keeps it: a source that does not exist, said in one line (404 over HTTP, exit 3 on the
command line). ``Path.expanduser`` raised RuntimeError "Could not determine home directory": a
500 "internal error (RuntimeError)" from POST /jobs, a 43-line traceback from `facet index`
and from every path option of `facet cluster` / `eval` / `bench` / `soup`."""

from __future__ import annotations

NO_USER = "~nosuchuser-facet"


def test_post_jobs_answers_404_naming_the_source(client) -> None:
    answer = client.post("/jobs", json={"source": f"{NO_USER}/x", "collection": "zz"})
    assert answer.status_code == 404, answer.text
    assert answer.json()["error"]["param"] == "source"
