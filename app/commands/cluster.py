"""``facet cluster``: cluster texts under an instruction and explain each cluster.

Texts come from a file (one per line in .txt, a ``text`` field per line in .jsonl, or
a GoalEx ``data.json`` with a ``texts`` list). The instruction embedder embeds them
under ``--instruction``, k-means groups them, and an InBedder checkpoint (``--explain``)
answers the same instruction about every text; each cluster is then described by the
TF-IDF keywords of its members' answers and its most central members.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from app.cli import handle_errors
from app.errors import InvalidRequestError, NotFoundError
from app.settings import get_settings


def read_texts(path: Path, limit: int | None = None) -> list[str]:
    """Texts from .txt (one per line), .jsonl (``text`` field) or a GoalEx-style .json (``texts``)."""
    if not path.is_file():
        raise NotFoundError(f"{path} does not exist")
    texts: list[str] = []
    if path.suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or not isinstance(data.get("texts"), list):
            raise InvalidRequestError(f"{path}: expected a JSON object with a 'texts' list")
        texts = [str(t) for t in data["texts"]]
    elif path.suffix == ".jsonl":
        with path.open(encoding="utf-8") as f:
            for line_no, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as e:
                    raise InvalidRequestError(f"{path}:{line_no}: invalid JSON: {e}") from e
                if not isinstance(row, dict) or "text" not in row:
                    raise InvalidRequestError(f"{path}:{line_no}: each line needs a 'text' field")
                texts.append(str(row["text"]))
    else:
        texts = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    texts = texts[:limit] if limit else texts
    if len(texts) < 2:
        raise InvalidRequestError(f"{path} holds {len(texts)} texts; clustering needs at least 2")
    return texts


def register(cli: typer.Typer) -> None:
    @cli.command("cluster")
    @handle_errors
    def cluster_cmd(
        source: Annotated[Path, typer.Argument(help=".txt (one text per line), .jsonl (text field) or data.json")],
        instruction: Annotated[str, typer.Option("--instruction", "-i", help="the aspect to group by")],
        k: Annotated[int, typer.Option("--k", help="number of clusters")] = 8,
        embedder: Annotated[str, typer.Option("--embedder", "-e", help="instruction embedder (name or path)")]
            = "inbedder",
        explain: Annotated[str | None, typer.Option(
            "--explain", help="InBedder checkpoint whose answers name the clusters ('' to skip)")]
            = "inbedder",
        limit: Annotated[int | None, typer.Option("--limit", help="use only the first N texts")] = None,
        keywords: Annotated[int, typer.Option("--keywords", help="keywords per cluster")] = 5,
        members: Annotated[int, typer.Option("--members", help="representative members per cluster")] = 3,
        answer_tokens: Annotated[int | None, typer.Option(
            "--answer-tokens", help="tokens InBedder generates per text (default: its answer_max_tokens)")] = None,
        seed: Annotated[int, typer.Option("--seed")] = 0,
        batch_size: Annotated[int, typer.Option("--batch-size")] = 32,
        out: Annotated[Path | None, typer.Option("--out", "-o", help="write the clusters as JSON")] = None,
    ) -> None:
        """Cluster SOURCE's texts under INSTRUCTION and print each cluster's keywords and members."""
        from sklearn.cluster import KMeans

        from embedders import load_embedder
        from embedders.explain import explain_clusters

        if k < 2:
            raise InvalidRequestError(f"--k must be at least 2, got {k}")
        if answer_tokens is not None and answer_tokens < 1:
            raise InvalidRequestError(f"--answer-tokens must be at least 1, got {answer_tokens}")
        if not instruction.strip():
            raise InvalidRequestError("--instruction must not be empty: it is what the texts are grouped by")
        texts = read_texts(source, limit)
        if k > len(texts):
            raise InvalidRequestError(f"--k {k} is more than the {len(texts)} texts")
        device = get_settings().device
        model = load_embedder(embedder, device=device)
        vectors = model.encode(texts, instruction=instruction, batch_size=batch_size, show_progress=True)
        labels = KMeans(n_clusters=k, n_init=4, random_state=seed).fit_predict(vectors).tolist()
        answers: list[str]
        if explain:
            explainer = model if explain == embedder and hasattr(model, "generate_answers") else \
                load_embedder(explain, device=device)
            if not hasattr(explainer, "generate_answers"):
                raise InvalidRequestError(f"--explain {explain!r} is not an InBedder checkpoint (it cannot answer)")
            answers = explainer.generate_answers(texts, instruction, max_new_tokens=answer_tokens,
                                                 batch_size=batch_size)
        else:
            answers = texts  # keywords from the texts themselves
        result = explain_clusters(texts, labels, answers, embeddings=vectors, top_k=keywords, members=members)
        rows: list[dict[str, Any]] = []
        for c in sorted(result, key=lambda r: -r.size):
            rows.append({"cluster": c.cluster, "size": c.size, "keywords": c.keywords,
                         "representatives": c.representatives})
            typer.echo(f"cluster {c.cluster} ({c.size} texts): {', '.join(c.keywords)}")
            for text in c.representatives:
                typer.echo(f"    - {text[:110]}")
        if out is not None:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps({"source": str(source), "instruction": instruction, "k": k,
                                       "embedder": embedder, "explain": explain or None, "seed": seed,
                                       "clusters": rows, "labels": labels, "answers": answers}, indent=1))
            typer.echo(f"wrote {out}")
