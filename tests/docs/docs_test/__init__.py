"""The docs test (tests/docs/run_docs_test.py): the command blocks, names and
figures of README.md and docs/*.md checked against the code and its runs."""
