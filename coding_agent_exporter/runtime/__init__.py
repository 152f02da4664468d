"""What runs it all: `cli` (threads, signals, logging, the commands), `config` (flags and
environment → one `Config`), `settings` (an agent's own settings file), `engine` (the reading
loop: files → harnesses → state), `pool` (catch-up on several cores) and `cache` (a fast
restart). The only package that may import every other.
"""
