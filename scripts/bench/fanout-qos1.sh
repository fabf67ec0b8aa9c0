#!/usr/bin/env bash
# Scenario fanout-qos1: fanout with QoS 1 end to end (publishes and subscriptions); see fanout.sh.
SCENARIO=fanout-qos1 QOS=1 exec "$(dirname "${BASH_SOURCE[0]}")/fanout.sh" "$@"
