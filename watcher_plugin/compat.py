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

"""Where the Watcher releases rdt-virt supports (14 to 17) differ.

Each shim names the release it exists for: delete it when that release
leaves the support matrix (``doc/source/install/support-matrix.rst``).
"""

import inspect


def nova_helper(osc):
    """Watcher's ``NovaHelper``, built as the running Watcher builds it.

    Watcher 14 to 16 (2025.1 to 2026.1) take the decision engine's
    ``OpenStackClients`` as ``osc``; Watcher 17 (2026.2) has no such
    parameter (``NovaHelper(session=None, context=None)``: openstacksdk
    with the ``[nova]`` options) and builds it without arguments, as its
    own strategies and compute model collector do. Delete the ``osc``
    branch when 2026.1 leaves the matrix.
    """
    from watcher.common import nova_helper as helper_mod
    helper = helper_mod.NovaHelper
    if 'osc' in inspect.signature(helper.__init__).parameters:
        return helper(osc=osc)
    return helper()


def embedded_extra_specs(flavor):
    """The extra specs Nova embedded in a server's flavor, or None.

    From compute API microversion 2.47 a server embeds its flavor with
    ``original_name`` and, for admins, ``extra_specs``; before, only its
    ``id`` and links. Watcher 14 and 15 list novaclient's servers, whose
    ``flavor`` is that dict; Watcher 16 and 17 list openstacksdk's, whose
    ``flavor`` is an SDK ``Flavor`` (a dict too) that reads
    ``extra_specs`` as ``{}`` when the API sent none. So a flavor without
    ``original_name`` embedded nothing (None), whatever ``extra_specs``
    reads; from 2.47 a plain dict without the key embedded nothing either.
    """
    if not flavor:
        return None
    if flavor.get('original_name') is None:
        return None
    specs = flavor.get('extra_specs')
    return None if specs is None else dict(specs)


def flavor_ref(flavor):
    """The id (before 2.47) or name (from 2.47) of an embedded flavor."""
    if not flavor:
        return None
    return flavor.get('original_name') or flavor.get('id')


def flavor_extra_specs(helper, ref):
    """The extra specs of flavor ``ref`` (an id or a name) from Nova.

    ``GET /flavors/{id}/os-extra_specs`` works at every microversion.
    Watcher 16 and 17 reach Nova through openstacksdk
    (``helper.connection``), 14 and 15 through novaclient
    (``helper.nova``); delete the novaclient branch when 2025.2 leaves
    the matrix.

    :raises: whatever the client raises (no such flavor, Nova down).
    """
    connection = getattr(helper, 'connection', None)
    if connection is not None:
        compute = connection.compute
        flavor = compute.find_flavor(ref, ignore_missing=False,
                                     is_public=None)
        return dict(compute.fetch_flavor_extra_specs(flavor.id).extra_specs
                    or {})
    flavors = helper.nova.flavors
    try:
        return dict(flavors.get(ref).get_keys())
    except Exception:
        # A name: private flavors too.
        for flavor in flavors.list(is_public=None):
            if flavor.name == ref:
                return dict(flavor.get_keys())
        raise


def server_uuid(server):
    """The uuid of a server from ``NovaHelper.get_instance_list()``.

    Watcher 16 (2026.1) and later list Watcher's own Server objects, which
    carry ``uuid``; Watcher 14 and 15 (2025.1, 2025.2) list novaclient's,
    which carry it as ``id``. Delete the fallback when 2025.2 leaves the
    matrix. Both carry the embedded ``flavor`` as a dict.
    """
    uuid = getattr(server, 'uuid', None)
    return server.id if uuid is None else uuid


def datasource_helper(name, osc):
    """Watcher's helper of datasource ``name``, built as Watcher builds it.

    The classes and constructors of ``DataSourceManager``: Gnocchi and
    Aetos authenticate through ``osc``'s Keystone session, Prometheus reads
    ``[prometheus_client]``. Aetos exists from Watcher 15 (2025.2): on 14
    (2025.1) there is no such datasource; delete the check when 2025.1
    leaves the matrix. The Prometheus datasource is deprecated since
    Watcher 16 (2026.1) and marked for removal in 2027.1.

    :returns: the helper, or None where this Watcher has no such
        datasource.
    :raises: whatever the helper's constructor raises (its options unset,
        the server unreachable).
    """
    if name == 'gnocchi':
        from watcher.decision_engine.datasources import gnocchi
        return gnocchi.GnocchiHelper(osc=osc)
    if name == 'prometheus':
        try:
            from watcher.decision_engine.datasources import prometheus
        except ImportError:
            return None
        return prometheus.PrometheusHelper()
    if name == 'aetos':
        try:
            from watcher.decision_engine.datasources import aetos
        except ImportError:
            return None
        return aetos.AetosHelper(osc=osc)
    return None


def host_label_name(helper):
    """The host label a Prometheus or Aetos helper queries by.

    ``[prometheus_client]`` or ``[aetos_client] fqdn_label``, as the
    helper read it: the attribute ``prometheus_fqdn_label`` in Watcher 14
    to 17.
    """
    return helper.prometheus_fqdn_label


def host_label_value(helper, hostname):
    """The value of the host label for a hypervisor hostname, or None.

    Watcher's own resolution (the label's value itself, else the value
    whose part before the first dot is the hostname; the targets are
    listed again when neither matches), private in Watcher 14 to 17
    (``_resolve_prometheus_instance_label``) but the same there.
    """
    return helper._resolve_prometheus_instance_label(hostname)
