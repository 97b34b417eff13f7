"""The assets of a rubric group, one module per stage of the flow; each module has a builder per asset."""
