"""Language-model targets: a packaged text corpus, a byte-level tokenizer with reserved canary ids, a tiny
GPT-2 pretrained as a base and fine-tuned (non-private, DP-SGD with Opacus, LoRA under Opacus), and a
per-token log-probability function (docs/references.md, "Language models")."""
