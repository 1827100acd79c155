"""The JSON Schema of ``results.json`` (every run kind) and ``compare.json``: ``results.schema.json``
beside this file (draft 2020-12). :func:`validate_results` checks a results object against it with the
``jsonschema`` library. The schema's ``schema_version`` is :data:`audit.run_context.SCHEMA_VERSION`;
both change together with any incompatible change of the format."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jsonschema

SCHEMA_PATH = Path(__file__).with_name("results.schema.json")


@functools.cache
def results_schema() -> dict:
    """The schema as a dict."""
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def validate_results(results: Any) -> None:
    """Raise ``jsonschema.ValidationError`` when ``results`` (a parsed results.json or compare.json) does
    not follow the schema."""

    jsonschema.Draft202012Validator(results_schema()).validate(results)
