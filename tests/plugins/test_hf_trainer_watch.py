"""The Trainer watch (audit/plugins/hf_trainer.py) patches ``transformers.Trainer`` without importing transformers:
at once when it is imported, else when the loop imports it (the post-import hook); the end-to-end Trainer loops are
in e2e/test_hf_trainer_zoo.py."""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers import ROOT

from audit.plugins.hf_trainer import _OnImport, watched_trainer


def test_the_hook_runs_after_the_module_is_executed_and_only_once(tmp_path, monkeypatch):
    (tmp_path / "late_module.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []
    hook = _OnImport("late_module", lambda module: seen.append(module.VALUE))
    sys.meta_path.insert(0, hook)
    try:
        import late_module  # noqa: F401 - the import under test

        assert seen == [1] and hook not in sys.meta_path
        assert type(late_module.__loader__).__name__ == "SourceFileLoader"  # the module's own loader, kept
    finally:
        sys.modules.pop("late_module", None)
        if hook in sys.meta_path:
            sys.meta_path.remove(hook)


def test_the_watch_imports_no_transformers():
    code = ("import sys\nfrom audit.plugins.hf_trainer import watched_trainer\nwith watched_trainer():\n    pass\n"
            "assert 'transformers' not in sys.modules, 'the watch imported transformers'\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_watch_patches_the_trainer_for_the_block_only():
    """Imported before the block or inside it (the hook), the Trainer is watched in the block and restored after."""
    transformers = pytest.importorskip("transformers")
    with watched_trainer():
        trainer = transformers.Trainer
        assert hasattr(trainer.__init__, "__wrapped__"), "the Trainer the loop imports is not watched"
    assert not hasattr(trainer.__init__, "__wrapped__"), "the patch outlived the block"
    assert not [finder for finder in sys.meta_path if isinstance(finder, _OnImport)]


def _one_step_trainer(compute_loss_override: str):
    """A ``Trainer`` subclass on a linear model over 4 examples, one training step; ``compute_loss_override``:
    ``"none"`` (the Trainer's own), ``"super"`` (an override that logs and calls ``super().compute_loss``) or
    ``"own"`` (a loss of its own)."""
    import torch
    import transformers

    class Linear(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(2, 1)

        def forward(self, x, labels=None):
            out = self.layer(x)[:, 0]
            return {"loss": ((out - labels) ** 2).mean(), "logits": out}

    class Overridden(transformers.Trainer):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            if compute_loss_override == "super":
                return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            out = model(**inputs)["logits"]
            return ((out - inputs["labels"]) ** 2).sum()

    rows = [{"x": torch.tensor([float(i), 1.0]), "labels": torch.tensor(float(i))} for i in range(4)]
    return (transformers.Trainer if compute_loss_override == "none" else Overridden), Linear(), rows


@pytest.mark.parametrize(("override", "default_loss"), [("none", True), ("super", True), ("own", False)])
def test_the_trainers_own_loss_is_seen_even_through_super(override, default_loss, tmp_path):
    """The ``labels=`` loss finding names the Trainer's own compute_loss also when an override calls super()."""
    pytest.importorskip("transformers")
    from audit.plugins.hf_trainer import trainer_facts

    with watched_trainer() as watch:
        import transformers

        cls, model, rows = _one_step_trainer(override)
        args = transformers.TrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=4, max_steps=1,
                                              use_cpu=True, report_to="none", save_strategy="no", disable_tqdm=True,
                                              logging_strategy="no", remove_unused_columns=False)
        cls(model=model, args=args, train_dataset=rows).train()
    assert trainer_facts(watch).default_loss is default_loss
