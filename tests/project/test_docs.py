"""The documentation site is tested like code (the pages' code blocks and the CLI reference run in
tests/e2e/test_docs_runs.py).

* Every run kind that takes a plugin says so in its help; the results-schema page lists every part.
* The dataset table of the plugin contracts states what the loaders return.
* The API pages document every module of audit.theory, audit.stats and attacks.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import ROOT, docs_hooks

DOCS = ROOT / "docs"


def test_every_run_kind_that_takes_a_plugin_says_so_in_its_help() -> None:
    texts = dict(docs_hooks().help_texts())
    for kind in ("dp", "membership", "mechanism", "inversion", "extraction"):
        assert "module:factory" in texts[f"python -m audit run {kind}"], kind
    assert "500 canaries" in texts["python -m audit run membership"]


def test_results_schema_page_lists_every_part() -> None:
    import json

    schema = json.loads((ROOT / "audit" / "schemas" / "results.schema.json").read_text())
    page = docs_hooks().schema_reference()
    for name in schema["$defs"]:
        assert name == "run" or f"| `{name}` |" in page
    for rule in schema["$defs"]["run"]["allOf"][1:]:  # what each kind requires
        assert f"| `{rule['if']['properties']['kind']['const']}` |" in page


DATASET_ROWS = {  # name -> (shape after n, low, high): the table of docs/reference/plugins.md
    "mnist": ((1, 28, 28), 0.0, 1.0), "digits": ((64,), 0.0, 1.0),
    "breast_cancer": ((30,), -1.0, 1.0), "synthetic": ((20,), -1.0, 1.0),
}


@pytest.mark.parametrize("name", sorted(DATASET_ROWS))
def test_plugin_dataset_table_matches_the_loaders(name: str) -> None:
    from targets.datasets import load_dataset

    shape, low, high = DATASET_ROWS[name]
    data = load_dataset(name)
    page = (DOCS / "reference" / "plugins.md").read_text(encoding="utf-8")
    row = next(line for line in page.splitlines() if line.startswith(f'| `"{name}"` |'))
    assert data.X.dtype == np.float32 and data.y.dtype == np.int64 and "float32" in row
    assert data.X.shape[1:] == shape and str(shape if len(shape) > 1 else shape[0]) in row.replace("(n, ", "(")
    assert low <= data.X.min() and data.X.max() <= high
    if low < 0:  # tabular sets: rows scaled into the unit ball
        assert np.linalg.norm(data.X, axis=1).max() <= 1.0 + 1e-6 and "unit ball" in row
    else:
        assert data.X.min() == 0.0 and data.X.max() == 1.0 and "[0, 1]" in row


def test_api_pages_cover_every_module() -> None:
    for package, page in (("audit/theory", "theory"), ("audit/stats", "stats"), ("attacks", "attacks")):
        text = (DOCS / "reference" / "api" / f"{page}.md").read_text(encoding="utf-8")
        for module in sorted((ROOT / package).glob("*.py")):
            if module.stem != "__init__":
                assert f"::: {package.replace('/', '.')}.{module.stem}\n" in text, module


def test_sphinx_roles_of_docstrings_are_plain_code_on_the_site():
    hooks = docs_hooks()
    assert hooks.strip_sphinx_roles("see :func:<code>audit.cli.main</code> and :mod:<code>~targets.models</code>, "
                                    "a:b:<code>c</code>") == ("see <code>audit.cli.main</code> and "
                                                              "<code>targets.models</code>, a:b:<code>c</code>")
