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

"""Schemata semantics: validation, new-group defaults and formatting.

What the kernel does with a write to a group's ``schemata`` file:

* The write must end with a newline; each line is ``NAME:id=val;id=val``.
  Lines are parsed into a staging area and nothing is applied unless every
  line is valid, so a failed write changes nothing. Resources and domains
  that are not named keep their values (partial writes).
* Cache values are hexadecimal capacity bit masks: within ``cbm_mask``,
  non-zero when ``min_cbm_bits`` > 0, one run of consecutive ones unless
  ``sparse_masks`` is 1, at least ``min_cbm_bits`` long. A mask may not
  overlap a group in ``exclusive`` mode, and a group in ``exclusive`` mode
  may not overlap any other group or the bits hardware shares (with CDP the
  code and data masks of the other groups both count).
* Memory bandwidth values are decimal, within ``[min_bandwidth, max]`` and
  rounded *up* to ``bandwidth_gran``. With ``mba_MBps`` any 32-bit value is
  taken as is (MBps for the software controller).
* An unknown domain id fails with ``EINVAL`` and no ``last_cmd_status`` text;
  every other failure explains itself there, in the kernel's words.

A new group starts with every cache bit that hardware shares, that a
shareable group uses or that nobody uses, cut to its first run of ones; if
that leaves fewer than ``min_cbm_bits`` the mkdir fails with ``ENOSPC``.

All functions are pure: *others* describes the other allocated CLOSIDs as
``(closid, mode, config)`` tuples where config is ``{schema: {dom: val}}``.
*domains* are the online domain ids: a tuple for every schema, or a mapping
``{schema name: ids}`` whose ``None`` entry serves the schemas not named
(L2 caches are domains of their own, the others follow the L3 caches).
"""

import errno

from rdt_virt.emulator import kparse

SHAREABLE = 'shareable'
EXCLUSIVE = 'exclusive'

#: The software controller's "no limit" (U32_MAX MBps).
MBPS_MAX = (1 << 32) - 1

_CDP_PEER = {'L3CODE': 'L3DATA', 'L3DATA': 'L3CODE'}


def _err(status, err=errno.EINVAL):
    return kparse.KernelError(err, status)


def is_mba_sc(profile, schema):
    """True when *schema* takes MBps (``MB`` with ``mba_MBps``)."""
    return profile.mba_mbps and schema.name == 'MB'


def default_value(profile, schema):
    """The value of a schema after mount or in a fresh group's MB line."""
    if schema.is_cache:
        return schema.resource.cbm_mask
    if is_mba_sc(profile, schema):
        return MBPS_MAX
    return schema.resource.max_bandwidth


def schema_domains(domains, schema):
    """The online domain ids of *schema* (see the module's notes)."""
    if isinstance(domains, dict):
        return domains.get(schema.name, domains[None])
    return domains


def default_config(profile, domains):
    """Every schema at its default, on every online domain."""
    return {s.name: {d: default_value(profile, s)
                     for d in schema_domains(domains, s)}
            for s in profile.schemas}


def cbm_overlaps(profile, schema, dom, cbm, closid, others, exclusive):
    """The kernel's ``rdtgroup_cbm_overlaps()``.

    :param exclusive: only count overlaps with groups in exclusive mode
        (otherwise any group, and the hardware-shared bits, count).
    """
    names = [schema.name]
    if schema.name in _CDP_PEER:
        names.append(_CDP_PEER[schema.name])
    for name in names:
        if not exclusive and cbm & schema.resource.shareable_bits:
            return True
        for other_closid, mode, config in others:
            if other_closid == closid:
                continue
            if cbm & config.get(name, {}).get(dom, 0):
                if not exclusive or mode == EXCLUSIVE:
                    return True
    return False


def _validate_cbm(text, res):
    try:
        val = kparse.kstrtoul(text, 16)
    except kparse.ParseError:
        raise _err("Non-hex character in the mask %s\n" % text) from None
    if (res.min_cbm_bits > 0 and val == 0) or val > res.cbm_mask:
        raise _err("Mask out of range\n")
    first, zero = kparse.first_run(val, res.cbm_len)
    if not res.sparse_masks and val >> zero:
        raise _err("The mask %x has non-consecutive 1-bits\n" % val)
    if zero - first < res.min_cbm_bits:
        raise _err("Need at least %d bits in the mask\n" % res.min_cbm_bits)
    return val


def _validate_bw(text, res, mba_sc, legacy):
    if legacy:
        # Linux 6.1: parsed as unsigned long, MBps rounded like percents.
        try:
            val = kparse.kstrtoul(text, 10)
        except kparse.ParseError:
            raise _err("Non-decimal digit in MB value %s\n" % text) from None
        if not mba_sc and not (res.min_bandwidth <= val <=
                               res.max_bandwidth):
            raise _err("MB value %d out of range [%d,%d]\n" % (
                val, res.min_bandwidth, res.max_bandwidth))
        return _mpam_round(_roundup(val, res.bandwidth_gran) & MBPS_MAX,
                           res)
    try:
        val = kparse.kstrtou32(text, 10)
    except kparse.ParseError:
        raise _err("Invalid MB value %s\n" % text) from None
    if mba_sc:
        return val
    if not res.min_bandwidth <= val <= res.max_bandwidth:
        raise _err("MB value %d out of range [%d,%d]\n" % (
            val, res.min_bandwidth, res.max_bandwidth))
    return _mpam_round(_roundup(val, res.bandwidth_gran), res)


def _div_round_closest(num, den):
    return (num + den // 2) // den


def _mpam_round(percent, res):
    """What an MPAM host shows after storing *percent* (mpam_resctrl.c).

    ``percent_to_mbw_max()`` picks the band whose upper bound is nearest,
    ``mbw_max_to_percent()`` turns the stored band back into the nearest
    percentage of its upper bound; the schemata shows the latter.
    """
    bits = getattr(res, 'bwa_wd', None)
    if not bits:
        return percent
    band = _div_round_closest(percent << bits, 100)
    band = max(band, 1) - 1
    return _div_round_closest((band + 1) * 100, 1 << bits)


def _roundup(val, gran):
    return (val + gran - 1) // gran * gran


def parse_write(text, profile, domains, closid, mode, others, legacy=False):
    """Validate the lines of a schemata write.

    :param text: what was written, without its (mandatory) final newline.
    :param domains: the online domain ids.
    :returns: the staged values, ``{schema: {dom: value}}``.
    :raises kparse.KernelError: the write fails; nothing is to be applied.
    """
    staged = {}
    for line in text.split('\n'):
        resname, colon, rest = line.partition(':')
        resname = kparse.strim(resname)
        if not colon:
            raise _err("Missing ':'\n")
        if rest == '':
            raise _err("Missing '%s' value\n" % resname)
        schema = profile.schema(resname)
        if schema is None or closid >= schema.num_closids:
            raise _err("Unknown or unsupported resource name '%s'\n"
                       % resname)
        _parse_line(rest, schema, profile, schema_domains(domains, schema),
                    closid, mode, others, staged.setdefault(schema.name, {}),
                    legacy)
    return staged


def _parse_line(line, schema, profile, domains, closid, mode, others,
                staged, legacy):
    while line:
        dom, _, line = line.partition(';')
        dom_id, eq, value = dom.partition('=')
        try:
            if not eq:
                raise kparse.ParseError()
            dom_id = kparse.kstrtoul(dom_id, 10)
        except kparse.ParseError:
            raise _err("Missing '=' or non-numeric domain\n") from None
        value = kparse.strim(value)
        if dom_id not in domains:
            # The kernel says nothing here: last_cmd_status stays "ok".
            raise _err('')
        if dom_id in staged:
            raise _err("Duplicate domain %d\n" % dom_id)
        if schema.is_cache:
            cbm = _validate_cbm(value, schema.resource)
            if cbm_overlaps(profile, schema, dom_id, cbm, closid, others,
                            exclusive=True):
                raise _err("Overlaps with exclusive group\n")
            if mode == EXCLUSIVE and cbm_overlaps(
                    profile, schema, dom_id, cbm, closid, others,
                    exclusive=False):
                raise _err("Overlaps with other group\n")
            staged[dom_id] = cbm
        else:
            staged[dom_id] = _validate_bw(
                value, schema.resource, is_mba_sc(profile, schema), legacy)


def init_config(profile, domains, closid, others):
    """The configuration the kernel gives a new control group.

    :raises kparse.KernelError: ENOSPC with ``No space on L3:0`` when a
        domain has fewer usable bits than ``min_cbm_bits``.
    """
    config = {}
    for schema in profile.schemas:
        doms = schema_domains(domains, schema)
        if not schema.is_cache:
            config[schema.name] = {d: default_value(profile, schema)
                                   for d in doms}
            continue
        res = schema.resource
        peer = _CDP_PEER.get(schema.name)
        values = {}
        for dom in doms:
            new = used = res.shareable_bits
            for _closid, mode, cfg in others:
                val = cfg.get(schema.name, {}).get(dom, 0)
                if peer:
                    val |= cfg.get(peer, {}).get(dom, 0)
                used |= val
                if mode == SHAREABLE:
                    new |= val
            new |= ~used & res.cbm_mask
            # Keep only the first run of ones: a valid contiguous default.
            first, zero = kparse.first_run(new, res.cbm_len)
            new &= ((1 << zero) - 1) if new else 0
            if kparse.popcount(new) < res.min_cbm_bits:
                raise _err("No space on %s:%d\n" % (schema.name, dom),
                           errno.ENOSPC)
            values[dom] = new
        config[schema.name] = values
    return config


def check_exclusive(profile, domains, closid, config, others):
    """May this group switch to exclusive mode? Raise if not."""
    has_cache = False
    for schema in profile.schemas:
        if not schema.is_cache:
            continue
        has_cache = True
        for dom in schema_domains(domains, schema):
            cbm = config.get(schema.name, {}).get(dom, 0)
            if cbm_overlaps(profile, schema, dom, cbm, closid, others,
                            exclusive=False):
                raise _err("Schemata overlaps\n")
    if not has_cache:
        raise _err("Cannot be exclusive without CAT/CDP\n")


def _line(profile, schema, items, legacy):
    return '%*s:%s\n' % (profile.name_width, schema.name, ';'.join(items))


def format_schemata(profile, domains, config, closid, legacy=False):
    """The text of a group's ``schemata`` file."""
    out = []
    width = profile.data_width
    for schema in profile.schemas:
        if closid >= schema.num_closids:
            continue
        vals = config.get(schema.name, {})
        items = []
        for dom in schema_domains(domains, schema):
            val = vals.get(dom, 0)
            if not legacy:
                items.append('%d=%x' % (dom, val) if schema.is_cache
                             else '%d=%d' % (dom, val))
            elif schema.is_cache:
                items.append('%d=%0*x' % (dom, width, val))
            else:
                items.append('%d=%*d' % (dom, width, val))
        out.append(_line(profile, schema, items, legacy))
    return ''.join(out)


def format_size(profile, domains, config):
    """The text of a group's ``size`` file: bytes per cache domain.

    A bit is worth ``cache size / cbm_len`` bytes (integer division, as in
    the kernel); bandwidth lines show the raw control value.
    """
    out = []
    for schema in profile.schemas:
        vals = config.get(schema.name, {})
        items = []
        for dom in schema_domains(domains, schema):
            val = vals.get(dom, 0)
            if schema.resource is profile.l2:
                size = profile.geometry.l2_size
                val = size // schema.resource.cbm_len * kparse.popcount(val)
            elif schema.is_cache:
                size = profile.domain(dom).l3_size
                val = size // schema.resource.cbm_len * kparse.popcount(val)
            items.append('%d=%d' % (dom, val))
        out.append(_line(profile, schema, items, False))
    return ''.join(out)


def format_bit_usage(schema, domains, allocs):
    """``info/<cache schema>/bit_usage`` for all allocated CLOSIDs.

    ``X`` shared by hardware and software, ``H`` hardware only, ``S``
    software shareable, ``E`` exclusive, ``0`` unused; most significant bit
    first.
    """
    res = schema.resource
    parts = []
    for dom in schema_domains(domains, schema):
        sw = excl = 0
        for _closid, mode, cfg in allocs:
            val = cfg.get(schema.name, {}).get(dom, 0)
            if mode == SHAREABLE:
                sw |= val
            elif mode == EXCLUSIVE:
                excl |= val
        chars = []
        for bit in range(res.cbm_len - 1, -1, -1):
            hw = res.shareable_bits >> bit & 1
            s = sw >> bit & 1
            if hw and s:
                chars.append('X')
            elif hw:
                chars.append('H')
            elif s:
                chars.append('S')
            elif excl >> bit & 1:
                chars.append('E')
            else:
                chars.append('0')
        parts.append('%d=%s' % (dom, ''.join(chars)))
    return ';'.join(parts) + '\n'


def allowed_l3_bytes(profile, dom, config):
    """Bytes of L3 a configuration may fill on *dom* (code | data masks).

    Without L3 allocation the whole cache is allowed.
    """
    size = profile.domain(dom).l3_size
    if not profile.l3:
        return size
    mask = 0
    for schema in profile.schemas:
        if schema.is_cache and schema.resource is profile.l3:
            mask |= config.get(schema.name, {}).get(dom, 0)
    return size // profile.l3.cbm_len * kparse.popcount(mask)
