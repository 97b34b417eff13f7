"""Publishing: warehouse views, the static report, evaluator worklists."""
