"""RankingDataGen's file names read outside it, one place for every reader (issue 19).

outputs.py writes the summary. Its counts file, which the Pusher's model card reads, is
rankcore.constants.SUMMARY_JSON: one component imports no other's modules.
"""

SUMMARY_MD = "summary.md"  # the DatagenSummary artifact's counts (SUMMARY_JSON) as a table
