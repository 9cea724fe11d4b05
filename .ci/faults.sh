#!/usr/bin/env bash
# The fault campaigns (stress/faults/campaign.js, docs/contributing-and-releasing.md): each
# store for FAULTS_SECONDS (default 30) under the nemesis, with one seed for the day (or
# FAULTS_SEED), printed first by each run, so any run can be repeated; then the naive
# control, which the checker must catch (campaign.js exits 1 when a control comes out clean).
set -uo pipefail
cd "$(dirname "$0")/.."
seed="${FAULTS_SEED:-$(date -u +%Y%m%d)}"
seconds="${FAULTS_SECONDS:-30}"
status=0
for store in sqlite redis redis-tokio redis-cluster postgres; do
  node stress/faults/campaign.js --store "$store" --seconds "$seconds" --seed "$seed" || status=1
done
node stress/faults/campaign.js --store redis --seconds 15 --seed "$seed" --control naive || status=1
exit "$status"
