"""The score variants of benchmarks/bench_lm_scores.py on token log-probabilities built by hand (no training):
each variant reads the tokens it names, the prefix's own end token never counted as a secret token."""

import importlib.util

import numpy as np
from helpers import ROOT


def _bench():
    spec = importlib.util.spec_from_file_location("bench_lm_scores", ROOT / "benchmarks" / "bench_lm_scores.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _padded(rows):
    out = np.full((len(rows), max(map(len, rows))), np.nan)
    for i, r in enumerate(rows):
        out[i, :len(r)] = r
    return out


def test_variants_read_the_tokens_they_name():
    bench = _bench()
    # two canaries: prefixes of 2 and 3 tokens (then their end token), secrets of 3 tokens, then the text's end
    prefix = _padded([[-1.0, -2.0, -9.0], [-1.0, -1.0, -1.0, -8.0]])
    full = _padded([[-1.0, -2.0, -0.1, -0.2, -0.4, -5.0], [-1.0, -1.0, -1.0, -0.3, -0.5, -0.7, -6.0]])
    bare = _padded([[-0.5, -0.5, -0.5, -4.0], [-0.25, -0.25, -0.25, -4.0]])
    z = {"full": full, "prefix": prefix, "bare": bare}
    for k in range(1, bench.OTHER_PREFIXES + 1):  # other prefixes: secret scored after a 1-token prefix
        z[f"shift{k}"] = _padded([[-1.0, -k, -1.0, -1.0, -3.0], [-1.0, -2.0, -2.0, -2.0, -3.0]])
        z[f"shift{k}_prefix"] = _padded([[-1.0, -3.0], [-1.0, -3.0]])
    got = bench.variants(z)
    own = np.array([-0.7 - 5.0 + 9.0, -1.5 - 6.0 + 8.0])
    np.testing.assert_allclose(got["audit (secret and end, given the prefix)"], own)
    np.testing.assert_allclose(got["secret tokens, end dropped"], [-0.7, -1.5])
    np.testing.assert_allclose(got["first secret token"], [-0.1, -0.3])
    np.testing.assert_allclose(got["secret tokens after the first"], [-0.6, -1.2])
    np.testing.assert_allclose(got["secret with no prefix"], [-1.5, -0.75])
    others = np.array([np.mean([-k - 2.0 for k in range(1, 5)]), -6.0])
    np.testing.assert_allclose(got[f"secret after {bench.OTHER_PREFIXES} other prefixes (mean)"], others)
    np.testing.assert_allclose(got["audit less the other prefixes' mean"], own - others)
