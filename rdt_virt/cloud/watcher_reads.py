# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""What Watcher's ``noisy_neighbor`` reads from Gnocchi, with its own code.

::

    python -m rdt_virt.cloud.watcher_reads WATCHER_CONF PERIOD UUID...

For each instance, calls Watcher's unmodified ``GnocchiHelper`` as
``NoisyNeighbor.get_current_and_previous_cache`` means to (the meter
``instance_l3_cache_usage`` over ``PERIOD`` and over twice that, mean,
granularity 300) and prints one JSON object: per instance ``current``,
``over_2p``, ``previous`` (``2 * over_2p - current``, the strategy's
formula) and the points Gnocchi holds (``[time, granularity, value]``).
Runs in its own process: Watcher's options live on the global
configuration object.
"""

import json
import sys

GRANULARITY = 300


class _Resource(object):
    """What the helper reads of an instance."""

    def __init__(self, uuid):
        self.uuid = uuid


def reads(helper, uuid, period):
    resource = _Resource(uuid)

    def mean(seconds):
        return helper.statistic_aggregation(
            resource, 'instance', 'instance_l3_cache_usage', seconds,
            'mean', GRANULARITY)
    current = mean(period)
    over_2p = mean(2 * period)
    points = helper.gnocchi.metric.get_measures(
        metric='cpu_l3_cache', resource_id=uuid, granularity=GRANULARITY,
        aggregation='mean', refresh=True)
    return {'current': current, 'over_2p': over_2p,
            'previous': None if None in (current, over_2p) else
            2 * over_2p - current,
            'points': [[p[0].isoformat(), p[1], p[2]] for p in points]}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    conf, period, uuids = argv[0], float(argv[1]), argv[2:]
    from watcher.common import service
    from watcher.decision_engine.datasources import gnocchi
    service.prepare_service(['watcher-reads', '--config-file', conf])
    helper = gnocchi.GnocchiHelper()
    print(json.dumps({u: reads(helper, u, period) for u in uuids}))
    return 0


if __name__ == '__main__':
    sys.exit(main())
