"""Resources: snapshots, versioned upserts, the latest pointer and queries (§1.2, §1.7)."""

from __future__ import annotations

from agl_events.types import LLM, PaginatedResult, PromptTemplate, ResourcesUpdate
from tests.store import RESOURCES_ID, llm, prompt


async def test_add_resources_creates_version_one_and_becomes_latest(store, clock):
    assert await store.get_latest_resources() is None
    clock.advance(1.0)  # decisions take the store clock
    before = clock()
    res = await store.add_resources({"main": llm("a"), "tmpl": prompt()})
    assert isinstance(res, ResourcesUpdate)
    assert RESOURCES_ID.match(res.resources_id) and len(res.resources_id) == 15
    assert res.version == 1 and res.create_time == res.update_time and res.create_time >= before
    assert isinstance(res.resources["main"], LLM) and res.resources["main"].model == "a"
    assert isinstance(res.resources["tmpl"], PromptTemplate) and res.resources["tmpl"].engine == "f-string"
    latest = await store.get_latest_resources()
    assert latest is not None and latest.model_dump() == res.model_dump()
    assert (await store.get_resources_by_id(res.resources_id)).model_dump() == res.model_dump()
    assert await store.get_resources_by_id("rs-000000000000") is None
    second = await store.add_resources({"main": llm("b")})
    assert second.resources_id != res.resources_id
    assert (await store.get_latest_resources()).resources_id == second.resources_id


async def test_update_existing_bumps_version_keeps_create_time_and_becomes_latest(store):
    first = await store.add_resources({"main": llm("a")})
    second = await store.add_resources({"main": llm("b")})
    updated = await store.update_resources(first.resources_id, {"main": llm("c")})
    assert updated.resources_id == first.resources_id and updated.version == 2
    assert updated.create_time == first.create_time and updated.update_time > first.update_time
    assert updated.resources["main"].model == "c"
    assert (await store.get_latest_resources()).resources_id == first.resources_id
    again = await store.update_resources(first.resources_id, {"other": prompt("x")})
    assert again.version == 3 and set(again.resources) == {"other"}  # resources are replaced, not merged
    got = await store.get_resources_by_id(first.resources_id)
    assert got.model_dump() == again.model_dump()
    assert (await store.get_resources_by_id(second.resources_id)).version == 1


async def test_update_unknown_id_creates_version_one(store):
    await store.add_resources({"main": llm("a")})
    created = await store.update_resources("rs-custom", {"main": llm("z")})
    assert created.resources_id == "rs-custom" and created.version == 1
    assert created.create_time == created.update_time
    assert (await store.get_latest_resources()).resources_id == "rs-custom"
    assert (await store.get_resources_by_id("rs-custom")).resources["main"].model == "z"


async def test_rollouts_pick_latest_after_update(store):
    first = await store.add_resources({"main": llm("a")})
    await store.add_resources({"main": llm("b")})
    await store.update_resources(first.resources_id, {"main": llm("c")})
    assert (await store.enqueue_rollout(input=1)).resources_id == first.resources_id


async def test_query_resources_insertion_order_filters_and_pages(store):
    ids = [(await store.add_resources({"main": llm(str(i))})).resources_id for i in range(4)]
    await store.update_resources(ids[0], {"main": llm("updated")})  # an update keeps its place
    everything = await store.query_resources()
    assert isinstance(everything, PaginatedResult)
    assert [r.resources_id for r in everything] == ids and everything.total == 4
    exact = await store.query_resources(resources_id=ids[2])
    assert [r.resources_id for r in exact] == [ids[2]] and exact.total == 1
    part = ids[1][3:9]
    assert [r.resources_id for r in await store.query_resources(resources_id_contains=part)] == [ids[1]]
    prefixed = await store.query_resources(resources_id_contains="rs-")
    assert prefixed.total == 4
    # exact and contains are ANDed
    assert (await store.query_resources(resources_id=ids[0], resources_id_contains=part)).total == 0
    page = await store.query_resources(limit=2, offset=1)
    assert [r.resources_id for r in page] == ids[1:3] and (page.total, page.limit, page.offset) == (4, 2, 1)
    assert list(await store.query_resources(offset=9)) == []
    assert list(await store.query_resources(limit=0)) == []


async def test_query_resources_sorting(store):
    ids = [(await store.add_resources({"main": llm(str(i))})).resources_id for i in range(3)]
    await store.update_resources(ids[0], {"main": llm("u")})
    by_update = await store.query_resources(sort_by="update_time", sort_order="desc")
    assert [r.resources_id for r in by_update] == [ids[0], ids[2], ids[1]]
    by_version = await store.query_resources(sort_by="version", sort_order="desc", limit=1)
    assert [r.resources_id for r in by_version] == [ids[0]] and by_version.total == 3
    by_id = await store.query_resources(sort_by="resources_id")
    assert [r.resources_id for r in by_id] == sorted(ids)
