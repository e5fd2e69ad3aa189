#!/bin/sh
# make fuzz: libFuzzer targets for the protocol parser, config loader and
# CIDR parser are not written yet; nothing to run.
echo "fuzz: no targets yet (protocol parser, config loader, CIDR parser planned)"
