# The two commands of the README. Both install what they need first (idempotent, cached).
.PHONY: setup app test bench
setup:
	bash scripts/setup.sh
app: setup
	.venv/bin/python app.py
test: setup
	bash scripts/test.sh
bench: setup
	bash scripts/bench.sh
