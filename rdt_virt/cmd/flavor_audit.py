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

"""``rdt-virt flavor-audit``: flavors whose Placement keys need a change.

Lists, through the compute API (openstacksdk), every flavor, public or
private, with RDT extra specs whose Placement keys are missing or
contradict them (:func:`rdt_virt.policy.placement.audit`), and prints the
``openstack flavor`` commands that fix each. The output is a shell script:
findings are comments, fixes are commands. Each finding says what the
flavor is:

* ``conflicting keys``: its Placement keys contradict its ``hw:`` keys;
  compute hosts refuse it;
* ``Placement mode, lacks ...``: it requests its CLOSID or an RDT trait
  from Placement but lacks a key (a trait: Placement may offer a host
  without the feature, which RDTFilter then refuses);
* ``filter-only, lacks ...``: no RDT Placement key at all; RDTFilter alone
  places it, which works but is not atomic.

A flavor may also carry a key it no longer needs
(:func:`rdt_virt.policy.placement.unneeded_traits`: ``CUSTOM_RDT_MBA`` on
a ``hw:rdt_priority=low`` flavor, which earlier releases asked for). It
works as it is, so the command that drops the key is printed as a comment,
for the operator to run if the flavor should reach hosts without MBA; such
a flavor alone does not count as one to change.

Exit status: 0 when no flavor needs a change, 1 when some do, 2 when the
cloud cannot be reached.
"""

from rdt_virt import exception
from rdt_virt.policy import placement

NEEDS_CHANGES = 1
FAILED = 2


def connect(cloud=None):
    """A connection to ``cloud`` (clouds.yaml) or to the OS_* variables."""
    import openstack
    return openstack.connect(cloud=cloud)


def flavors(conn):
    """Every flavor, private ones included, with its extra specs."""
    # is_public=None lists public and private flavors for an admin.
    for flavor in conn.compute.flavors(details=True, is_public='None'):
        specs = flavor.extra_specs
        if specs is None:
            # Before compute API microversion 2.61 the list has none.
            specs = conn.compute.fetch_flavor_extra_specs(flavor).extra_specs
        yield flavor, dict(specs or {})


def findings(conn):
    """``[(flavor, Audit or InvalidExtraSpec)]`` for flavors to look at.

    Flavors to fix, and flavors that only carry keys they no longer need.
    """
    found = []
    for flavor, specs in flavors(conn):
        try:
            result = placement.audit(specs)
        except exception.InvalidExtraSpec as e:
            found.append((flavor, e))
            continue
        if not result.ok or result.unneeded:
            found.append((flavor, result))
    return found


def to_change(found):
    """How many of :func:`findings` need a change (not only advice)."""
    return sum(1 for _flavor, result in found
               if isinstance(result, exception.InvalidExtraSpec) or
               not result.ok)


def report(found, out):
    for flavor, result in sorted(found, key=lambda f: f[0].name):
        label = '# %s (id %s)' % (flavor.name, flavor.id)
        if isinstance(result, exception.InvalidExtraSpec):
            out.write('%s: invalid RDT extra specs, fix by hand: %s\n' % (
                label, result.message))
            continue
        if not result.ok:
            lacks = ', '.join('%s=%s' % kv
                              for kv in sorted(result.set.items()))
            if result.kind == placement.CONFLICTING:
                out.write('%s: conflicting keys, refused by compute hosts: '
                          '%s\n' % (label, '; '.join(result.conflicts)))
            elif result.kind == placement.PLACEMENT_INCOMPLETE:
                out.write('%s: Placement mode, lacks %s\n' % (label, lacks))
            else:
                out.write('%s: filter-only, lacks %s\n' % (label, lacks))
            for command in placement.fix_commands(flavor.id, result):
                out.write(command + '\n')
        if result.unneeded:
            # Advice, not a fix: commented out, so that running the
            # output with sh leaves the flavor as it is.
            out.write('%s: works, but no longer needs %s: %s\n' % (
                label, ', '.join(sorted(result.unneeded)),
                '; '.join(result.unneeded[k]
                          for k in sorted(result.unneeded))))
            for command in placement.unneeded_commands(flavor.id, result):
                out.write('#   ' + command + '\n')


def run(args, out, err, connect_fn=None):
    """The ``flavor-audit`` subcommand."""
    try:
        conn = (connect_fn or connect)(cloud=args.os_cloud)
        found = findings(conn)
    except Exception as e:
        err.write('rdt-virt flavor-audit: cannot list the flavors: %s\n' % e)
        return FAILED
    report(found, out)
    changes = to_change(found)
    err.write('%d flavor(s) to change\n' % changes)
    if len(found) > changes:
        err.write('%d flavor(s) with keys they no longer need (commented '
                  'out above)\n' % (len(found) - changes))
    return NEEDS_CHANGES if changes else 0
