"""Run directories (:func:`audit.run_context.make_run_dir`): ``mkdir`` alone decides which name is free, so two
runs naming a folder at the same moment each get their own (issue 53); a folder that cannot be written is one
line naming the fix (:func:`audit.run_context.writing_into`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from audit.errors import UserError
from audit.run_context import fresh_dir, make_run_dir, writing_into


def test_a_taken_name_gets_the_next_suffix(tmp_path) -> None:
    (tmp_path / "sweep-1").mkdir()
    (tmp_path / "sweep-1-2").mkdir()
    assert make_run_dir(tmp_path, "dp", "t", name="sweep-1").run_dir == tmp_path / "sweep-1-3"
    assert fresh_dir(tmp_path, "other") == tmp_path / "other"


def test_a_folder_made_between_choosing_a_name_and_mkdir_is_not_taken(tmp_path, monkeypatch) -> None:
    """Another run creates the folder after this one found the name free: the old ``exists()``-then-``mkdir``
    failed with "File exists"; the creation itself now decides, and the loser moves on."""
    real_mkdir = Path.mkdir
    raced: list[Path] = []

    def mkdir_after_a_rival(self: Path, *args, **kwargs) -> None:
        if self.name.startswith("base") and not raced:
            raced.append(self)
            real_mkdir(self)  # the rival run wins the name first
        real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", mkdir_after_a_rival)
    made = make_run_dir(tmp_path, "dp", "t", name="base").run_dir
    assert raced == [tmp_path / "base"] and made == tmp_path / "base-2" and made.is_dir()


def test_an_unwritable_output_folder_is_one_line_with_the_fix(tmp_path) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    with pytest.raises(UserError, match=r"cannot write to output directory .*a_file/runs \(.*\); pass a writable "):
        make_run_dir(blocker / "runs", "dp", "t")


def test_writing_into_names_the_folder_the_reason_and_the_fix(tmp_path) -> None:
    with pytest.raises(UserError) as refused, writing_into(tmp_path, "do this"):
        raise PermissionError(13, "Permission denied")
    assert str(refused.value) == f"cannot write to output directory {tmp_path} (Permission denied); do this"
