"""RankingDataGen's file names read outside it, one place for every reader (issue 19).

outputs.py writes the summary; the Pusher's model card and the CLI (pipelines/) read it.
"""

SUMMARY_JSON = "summary.json"  # the DatagenSummary artifact's counts
SUMMARY_MD = "summary.md"  # the same as a Markdown table
