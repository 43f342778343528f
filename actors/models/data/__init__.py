"""Vendored model assets (see NOTICE.txt); a package so wheels ship its files."""
