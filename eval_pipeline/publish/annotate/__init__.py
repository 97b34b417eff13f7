"""The annotate workspace: people rate samples by their rubric\x27s protocol (``eval-pipeline annotate``)."""
