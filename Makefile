# The two commands of the README. Both install what they need first (idempotent, cached).
.PHONY: setup app test test-fast bench
setup:
	bash scripts/setup.sh
app:  # the viewer only (about a minute on a fresh clone); captures need `make setup`
	APP_ONLY=1 bash scripts/setup.sh
	.venv/bin/python app.py
test: setup
	bash scripts/test.sh
test-fast:  # the inner loop: no browser, no live capture, no oracle build (needs a previous `make setup`)
	APP_ONLY=1 bash scripts/setup.sh
	bash scripts/test.sh -m "not browser and not slow" -q
bench: setup
	bash scripts/bench.sh
