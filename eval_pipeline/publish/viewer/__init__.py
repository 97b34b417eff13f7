"""The local results viewer (`eval-pipeline view`)."""
