"""The project: every file's facts and the lookups over them (`project_facts`), the call
graph (`call_sites`), which files an FSDP use reaches (`scripts`), project-wide tables kept
between runs (`stored_tables`), and the project-wide queries (torch's checkpoint under the
project's names, forwarding helpers, FSDP use, BatchNorm freezers), mixed into the index."""
