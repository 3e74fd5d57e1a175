"""A client following its job after another deleted the collection read a bare "no index job 3"
(an explorer with several clients of one `facet serve`): the answer says a job goes with its
collection."""

from __future__ import annotations

import pytest

from app.errors import NotFoundError
from tests.app.services.conftest import write_corpus


def test_a_job_whose_collection_was_deleted_says_why_it_is_gone(facet, tmp_path) -> None:
    write_corpus(tmp_path / "src", 2)
    report = facet.index(tmp_path / "src", "gone")
    facet.delete_collection("gone")
    with pytest.raises(NotFoundError, match=rf"^no index job {report.job_id} \(a job is deleted "
                                            r"with its collection: `facet collections` lists"):
        facet.job(report.job_id)
