#!/usr/bin/env bash
# One small run of every kind (and of the dp and membership variants whose reports differ), all into one
# folder of runs, then a comparison of the membership run: the output to compare byte for byte (results.json
# less its volatile keys, every PNG and HTML) before and after a change to the results or the reports.
# Usage (from the repository root): tools/small_runs.sh OUT_DIR    (takes a few minutes on 2 cores)
set -euo pipefail
out=${1:?usage: tools/small_runs.sh OUT_DIR}
py=${PYTHON:-python}
mkdir -p "$out"
# the language-model runs start from the cached base models (pretrained once, by any earlier LM run or test)
lm_cache=${LM_BASE_CACHE:-$HOME/.cache/privacy-audit}
run() {  # NAME ARGS...: one run into $out/NAME (the run's folder is renamed so that two baselines line up);
  local name=$1; shift  # a run already there is kept (delete OUT_DIR to redo them all)
  [ -d "$out/$name" ] && return 0
  local tmp="$out/.tmp-$name"
  rm -rf "$tmp"
  if [[ $name == membership-lm* ]] && compgen -G "$lm_cache/lm-base-*.safetensors" > /dev/null; then
    mkdir -p "$tmp/cache" && cp "$lm_cache"/lm-base-*.safetensors "$tmp/cache/"
  fi
  "$py" -m audit "$@" --quiet --out "$tmp" || [ $? = 1 ]  # exit 1: a violation, as the run meant
  local dir
  dir=$(find "$tmp" -mindepth 1 -maxdepth 1 -type d ! -name cache | head -n 1)
  rm -rf "${out:?}/$name"
  mv "$dir" "$out/$name"
  rm -rf "$tmp"
}
run membership run membership --target nonprivate_digits --quick --canaries 120
run membership-model run membership --target examples.trained_sklearn:model --quick
run membership-lm run membership --target nonprivate_tinygpt --quick --references 1
AUDIT_CANDIDATES=120 run membership-lm-plugin run membership --target examples.lm_ngram:model --references 1
run dp run dp --target dpgd_logreg_digits --runs 60 --device cpu
run dp-one-run run dp --target dpgd_logreg_digits --one-run --quick --device cpu
run dp-check-config run dp --target examples.zoo.hooked:correct --check-config --device cpu
run dp-check-config-violation run dp --target examples.zoo.hooked:no_clipping --check-config --device cpu
run mechanism run mechanism --target laplace_count --draws 3000
run inversion run inversion --target nonprivate_logreg_digits --quick --steps 30 --black-box-steps 2
run extraction run extraction --target dperm_digits --quick
run reconstruction run reconstruction --target dperm_breast_cancer --candidates 10 --runs 60
run sweep sweep dp --target dpgd_logreg_digits --epsilons 1,2 --runs 40 --quick --device cpu
# a comparison is written to a fresh folder under $out/compare (its compare.json names its own paths)
rm -rf "${out:?}/compare"
"$py" -m audit compare "$out/membership" "$out/dp" --out "$out/compare"
rm -rf "${out:?}/compare/cache"
"$py" -m audit report "$out"  # the index of the runs
# compare with an earlier folder: python tools/compare_small_runs.py EARLIER_DIR "$out"
echo "small runs written to $out"
