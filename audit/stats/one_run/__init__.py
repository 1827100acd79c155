"""One-run auditing: m canaries of one training run, each in by its own fair coin [docs/references.md,
"One-run auditing"]. :mod:`.steinke` (the (eps, delta) p-value and bound of Steinke, Nasr, Jagielski 2023),
:mod:`.fdp` (the f-DP test of Mahloujifar, Melis, Chaudhuri 2025), :mod:`.design` (canary count and guess
counts chosen by simulating the claimed DP-SGD), :mod:`.leak` (black-box guess shapes chosen to catch a leak
confined to the fewest canaries) and :mod:`.frontier` (jax_privacy-style ROC-frontier
estimates, for comparison only)."""
