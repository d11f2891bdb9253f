"""Reproduction of the DL-compiler survey experiments (E1 graph optimization, E2 compile overhead, E3 dynamic shapes)."""
