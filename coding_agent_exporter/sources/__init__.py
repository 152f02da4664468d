"""Where bytes and facts come from: the agents' files, SQLite tables, file events, processes.

Read-only, always. `tail` and `sqlite_tail` read what is new in a file or table; `decode` turns
lines into values; `watch` (over `fsobserver` and `inotify`) says which files changed;
`processes`, `procwatch`, `holders` and `terminals` answer questions about running programs;
`places` says where the user's home and our own state folder are on this system.
Nothing here knows an agent's format: that is `harnesses`.
"""
