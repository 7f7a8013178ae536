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

"""Which datasource an audit of rdt_noisy_neighbor reads.

Watcher's strategies take the first datasource of their order that
serves all their metrics (``DataSourceManager.get_backend``): the
strategy's own ``[watcher_strategies.<name>] datasources`` when set, else
``[watcher_datasources] datasources``. That choice goes by Watcher's
metric maps, which hold none of rdt-virt's meters, so the strategy walks
the same order itself: the first datasource it can read (Gnocchi,
Prometheus or Aetos) whose helper Watcher can build is the audit's, and
the audit parameter ``datasources``, where given, replaces the order for
that audit. Names the strategy does not read (``grafana``, ``monasca``)
are passed over, as are datasources this Watcher does not have (Aetos on
Watcher 14) and those whose helper fails to build (options unset, server
unreachable); with none left, the audit fails saying why for each.
"""

from oslo_config import cfg
from oslo_log import log
from watcher.common import exception

from watcher_plugin import compat
from watcher_plugin import meters
from watcher_plugin import promql

CONF = cfg.CONF
LOG = log.getLogger(__name__)

READ = ('gnocchi', 'prometheus', 'aetos')


class NoDatasource(exception.WatcherException):
    msg_fmt = ('rdt_noisy_neighbor: no datasource to read memory bandwidth '
               'from, in the order %(order)s: %(why)s')


def order(params, config):
    """The datasources to try, in order.

    :param params: the audit's parameters (``datasources``).
    :param config: the strategy's configuration (its ``datasources``).
    """
    names = params.get('datasources') or getattr(config, 'datasources',
                                                 None)
    if not names:
        names = CONF.watcher_datasources.datasources
    return list(names or ())


def choose(names, osc, instance_label=promql.INSTANCE_LABEL):
    """The reader of the first datasource of ``names`` that works.

    :raises: :class:`NoDatasource` naming why each one did not.
    """
    why = []

    def skip(name, reason):
        LOG.warning('rdt_noisy_neighbor passes over datasource %s: %s',
                    name, reason)
        why.append('%s: %s' % (name, reason))

    for name in names:
        if name not in READ:
            skip(name, 'not read by rdt_noisy_neighbor')
            continue
        try:
            helper = compat.datasource_helper(name, osc)
        except Exception as e:
            skip(name, e)
            continue
        if helper is None:
            skip(name, 'not in this Watcher release')
            continue
        LOG.info('rdt_noisy_neighbor reads %s', name)
        if name == 'gnocchi':
            return meters.Meters(helper)
        return promql.PromQLMeters(helper, instance_label)
    raise NoDatasource(order=', '.join(names) or '(none)',
                       why='; '.join(why) or 'no datasource configured')
