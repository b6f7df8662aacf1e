"""Talk kit values: token-anchored notes (``notes.json``) and decks (``deck.json``).

Pure data, validated once when read (docs/TALK.md has both formats). The app, the exporter and
the CLI read and write them through :mod:`viewer.talk.notes` and :mod:`viewer.talk.deck`; no
other module parses these files.
"""
