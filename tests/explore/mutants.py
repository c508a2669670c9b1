"""The mutation catalogue: defects a sceptical reviewer would plant, each one guard (a
condition, a lease, a retry, a hash, a read) taken away or bent, across the five patterns,
both backends and the slot clock. `python -m tests.explore.mutate` plants each in a
scratch copy and runs the explorer tier against it: every one must be found.

Each is one exact replacement: `old` must be in `path` exactly once. `selection` is the
pytest `-k` expression of the explorer tests that should find it (the scenarios its code
runs in)."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Mutant:
    name: str
    defect: str
    path: str
    old: str
    new: str
    selection: str = "no_schedule"


CATALOGUE: tuple[Mutant, ...] = (
    # -- pattern 1: the starter --------------------------------------------------------------
    Mutant(
        "starter-taken-is-failure",
        "the starter treats ExecutionAlreadyExists as a failure (every redelivery of a "
        "started key raised, then dead-lettered)",
        "handlers/executions.py",
        """            if aws_code(exc) != "ExecutionAlreadyExists":
                raise
            if reuse_policy == ReusePolicy.REJECT_DUPLICATE:""",
        """            if aws_code(exc) != "ExecutionAlreadyExists" or True:
                raise
            if reuse_policy == ReusePolicy.REJECT_DUPLICATE:""",
        "starter and step",
    ),
    Mutant(
        "starter-error-is-duplicate",
        "the starter takes any failed start (a throttle, a 5xx) for a duplicate",
        "handlers/executions.py",
        """            if aws_code(exc) != "ExecutionAlreadyExists":
                raise
            if reuse_policy == ReusePolicy.REJECT_DUPLICATE:""",
        """            if reuse_policy == ReusePolicy.REJECT_DUPLICATE:""",
        "starter and step",
    ),
    Mutant(
        "names-truncated-without-hash",
        "a long or unsafe key's name is its readable prefix cut short, without the hash "
        "(two keys alike at the start become one execution)",
        "handlers/names.py",
        """    prefix = readable(key)[: room - HASH_CHARS - 2]
    return f"{prefix}--{key_hash(key)}\"""",
        """    prefix = readable(key)[: room - HASH_CHARS - 2]
    return f"{prefix}--{key_hash(prefix)}\"""",
        "starter",
    ),
    Mutant(
        "failed-only-reruns-running",
        "ALLOW_DUPLICATE_FAILED_ONLY starts the next attempt whatever the taken name's "
        "execution did (a running or succeeded one too)",
        "handlers/executions.py",
        """            if status not in RETRYABLE_STATUSES:
                return Outcome(DUPLICATE, name, arn, attempt, status)""",
        """            if status not in RETRYABLE_STATUSES and False:
                return Outcome(DUPLICATE, name, arn, attempt, status)""",
        "starter and ALLOW",
    ),
    Mutant(
        "durable-taken-is-failure",
        "the durable backend treats DurableExecutionAlreadyStartedException as a failure",
        "handlers/executions.py",
        """            if aws_code(exc) != DURABLE_ALREADY_STARTED:
                raise""",
        """            if aws_code(exc) != DURABLE_ALREADY_STARTED or True:
                raise""",
        "starter and durable",
    ),
    # -- pattern 5: the ETL ------------------------------------------------------------------
    Mutant(
        "etl-put-without-if-none-match",
        "the conditional-write strategy's PUT without If-None-Match (the last writer wins)",
        "handlers/s3_publish.py",
        """    condition = {"IfNoneMatch": "*"} if only_if_absent else {}""",
        """    condition = {}""",
        "ETL and conditional",
    ),
    Mutant(
        "etl-412-is-failure",
        "the conditional-write strategy takes S3's 412 (written meanwhile) for a failure",
        "handlers/etl.py",
        """            if code == "PreconditionFailed":  # written meanwhile: a concurrent duplicate
                return {"status": DUPLICATE, "output": output}""",
        """            if code == "PreconditionFailed" and False:
                return {"status": DUPLICATE, "output": output}""",
        "ETL and conditional",
    ),
    Mutant(
        "etl-no-head-first",
        "a redelivery after completion is not looked up first: it transforms again (and "
        "meets the 412 only at the end)",
        "handlers/etl.py",
        """        if published(config, key):
            return {"status": DUPLICATE, "output": output}""",
        """        if False:
            return {"status": DUPLICATE, "output": output}""",
        "ETL and conditional",
    ),
    Mutant(
        "etl-lock-unconditional",
        "the control record's lock is taken without its condition (a live lock is taken over)",
        "handlers/etl.py",
        """            ConditionExpression=(
                "attribute_not_exists(id) OR (#s = :in_progress AND lock_expires < :now)"
            ),""",
        """            ConditionExpression=(
                "attribute_not_exists(id) OR (#s = :in_progress) OR lock_expires < :now"
            ),""",
        "ETL and control",
    ),
    Mutant(
        "etl-lock-outlives-nothing",
        "the control record's lock expires at once (a running transform's lock is free)",
        "handlers/etl.py",
        """                "lock_expires": {"N": f"{now + remaining_ms / 1000:.3f}"},""",
        """                "lock_expires": {"N": f"{now:.3f}"},""",
        "ETL and control",
    ),
    Mutant(
        "etl-release-any-owner",
        "the control record's lock is released without its owner condition (a release the "
        "SDK sends again, its answer lost, drops the lock a duplicate took meanwhile: the "
        "retry transforms beside it)",
        "handlers/etl.py",
        '            ConditionExpression="#s = :in_progress AND #w = :owner",\n'
        '            ExpressionAttributeNames={"#s": "status", "#w": "owner"},\n'
        '            ExpressionAttributeValues={":in_progress": {"S": IN_PROGRESS}, '
        '":owner": {"S": owner}},',
        '            ConditionExpression="#s = :in_progress",\n'
        '            ExpressionAttributeNames={"#s": "status"},\n'
        '            ExpressionAttributeValues={":in_progress": {"S": IN_PROGRESS}},',
        "ETL and control",
    ),
    Mutant(
        "etl-own-lock-is-anothers",
        "a lock put the SDK resent after a lost answer finds the attempt's own lock and "
        "fails InProgress: the key is held until the lock expires",
        "handlers/etl.py",
        """        if item.get("owner", {}).get("S") == owner:""",
        """        if False:""",
        "ETL and control",
    ),
    Mutant(
        "etl-owner-is-request-id",
        "the control record's lock is owned by the request id alone (Lambda's retry keeps "
        "it: an attempt that timed out and runs on releases its retry's lock)",
        "handlers/etl.py",
        "owner = f\"{getattr(context, 'aws_request_id', 'local')}/{uuid.uuid4().hex[:12]}\"",
        'owner = getattr(context, "aws_request_id", "local")',
        "ETL and control",
    ),
    Mutant(
        "etl-deterministic-rewrites",
        "the deterministic strategy rewrites an output it finds published",
        "handlers/etl.py",
        """        key = output_key(config, ref)
        if not published(config, key):""",
        """        key = output_key(config, ref)
        if not published(config, key) or True:""",
        "ETL and deterministic",
    ),
    Mutant(
        "etl-powertools-no-version",
        "the Powertools strategy keys its record by the object key alone (a new version of "
        "it is taken for a duplicate of the old)",
        "handlers/etl.py",
        """        obj = {**ref.as_dict(), "identity": ref.identity}""",
        """        obj = {**ref.as_dict(), "identity": ref.key}""",
        "ETL and powertools",
    ),
    # -- pattern 3: the scheduler: its API, stream, sweep and claim ---------------------------
    Mutant(
        "claim-unconditional",
        "the claim takes the message whatever its status (a cancelled one, or one already DONE)",
        "handlers/scheduler_store.py",
        '                "#s = :standby OR (#s = :firing AND (claimed_by = :me OR "',
        '                "(#s = :standby OR attribute_exists(pk)) OR '
        '(#s = :firing AND (claimed_by = :me OR "',
        "scheduler and cancelled",
    ),
    Mutant(
        "cancel-after-claim",
        "a cancel is accepted after the message was claimed (200, yet it fires)",
        "handlers/scheduler.py",
        "    if not transition(config, message_id, *cancelled, unsent=True):",
        "    cancelled = (Status.RESERVED, Status.STANDBY, Status.FIRING), Status.CANCELLED\n"
        "    if not transition(config, message_id, *cancelled):",
        "scheduler and cancelled",
    ),
    Mutant(
        "register-overwrites",
        "a registration replayed under its Idempotency-Key overwrites the stored message "
        "(a fired one is STANDBY again)",
        "handlers/scheduler_store.py",
        'Item=item, ConditionExpression="attribute_not_exists(pk)"',
        'Item=item, ConditionExpression="attribute_exists(pk) OR attribute_not_exists(pk)"',
        "scheduler",
    ),
    Mutant(
        "stream-own-execution-for-joined",
        "a late stream record of a message written in time for its slot starts an execution "
        "of its own after the slot fired it (finding 7 of the targets issue: a slot of one "
        "paid for nothing)",
        "handlers/scheduler.py",
        "    indexed = written is not None and written + 1 <= slots.join_by(slot)\n",
        "    indexed = False\n",
        "slot",
    ),
    # -- pattern 3: the slot clock -------------------------------------------------------------
    Mutant(
        "slot-claim-any-firing",
        "the slot clock's claim takes any FIRING message, not only one whose claimant's "
        "lease ended (a live claim is taken over: delivered twice)",
        "handlers/scheduler_store.py",
        '"(lease < :expired AND attribute_not_exists(unrecorded))))"',
        '"(lease < :expired AND attribute_not_exists(unrecorded)) OR #s = :firing))"',
        "slot",
    ),
    Mutant(
        "slot-claimant-without-attempt",
        "reading defect 1: a retried Fire (and its workers) claims as the same claimant as "
        "the attempt before it, so it takes over claims the first attempt (or its workers) "
        "still deliver",
        "handlers/scheduler_slots.py",
        "        me = f\"{event['claimant']}#{invocation}\"\n"
        "    else:\n"
        '        execution = str(event["execution"])\n'
        "        retried = attempt > 0 or is_restart(execution)\n"
        "        me = claimant(execution, attempt, invocation)",
        "        me = str(event['claimant'])\n"
        "    else:\n"
        '        execution = str(event["execution"])\n'
        "        retried = attempt > 0 or is_restart(execution)\n"
        "        me = execution",
        "slot",
    ),
    # (slot-members-twice, a read listing a message twice when the eventually consistent
    # index shows it under two lanes, is out of the catalogue since a FIRING message stays
    # in its STANDBY lane: a slot reads no two lanes one message moves between, but for
    # 0.4's FIRING lanes, which no scenario fills. The dedupe stays, for those.)
    Mutant(
        "slot-sdk-resends-deliveries",
        "reading defect 3: the delivery clients at max_attempts (retries) instead of "
        "total_max_attempts (sends): a target invoke that ran is sent again by the SDK",
        "handlers/scheduler_slots.py",
        'retries={"total_max_attempts": sends, "mode": "standard"},',
        'retries={"max_attempts": sends, "mode": "standard"},',
        "slot",
    ),
    Mutant(
        "slot-claim-error-ends-invocation",
        "reading defect 4: a claim that fails (the table throttling) fails the invocation "
        "after other claims landed, instead of being retried for that message",
        "handlers/scheduler_slots.py",
        "            if attempt == CLAIM_ATTEMPTS - 1:\n"
        '                log("WARNING", "not claimed", message_id=message_id, exc=exc)\n'
        "                return exc",
        "            if True:\n"
        '                log("WARNING", "not claimed", message_id=message_id, exc=exc)\n'
        "                raise",
        "slot",
    ),
    Mutant(
        "slot-record-once",
        "the slot's final status write is tried once (a transient error leaves a delivered "
        "message FIRING, delivered again when its claim is taken over)",
        "handlers/scheduler_slots.py",
        "    for attempt in range(RECORD_ATTEMPTS):",
        "    for attempt in range(1):",
        "slot",
    ),
    Mutant(
        "slot-no-second-read",
        "the slot reads the index once: a message the index had not caught up with waits "
        "for the sweep",
        "handlers/scheduler_slots.py",
        "        fire_these(members(table, slot, statuses, shard, of))",
        "        pass",
        "slot",
    ),
    # (slot-retry-reads-standby-only, a retried Fire reading the STANDBY lanes alone, is
    # out of the catalogue since a FIRING message stays in its STANDBY lane: every read
    # lists it, and only 0.4's FIRING lanes, which no scenario fills, are a retry's alone.
    # A retry that never outwaits the earlier attempt's live leases is not found either:
    # any later read takes a dead claim up once its lease ends, so it only makes a message
    # later, within what its faults excuse.)
    Mutant(
        "slot-resends-blind",
        "a send whose outcome was lost is sent again to a Lambda target that drops no "
        "redelivery (it may have run: applied twice)",
        "handlers/scheduler_slots.py",
        "        if self.policy == Resend.NEVER:",
        "        if False:",
        "slot",
    ),
    Mutant(
        "slot-takeover-ignores-earlier-sends",
        "a claim taken over ignores the sends its earlier claimant counted: one that died "
        "after sending is sent again, to a target that drops no redelivery",
        "handlers/scheduler_slots.py",
        '        earlier = sum(1 for t in tokens if not t.startswith(mine + "."))',
        "        earlier = 0",
        "slot",
    ),
    Mutant(
        "slot-budget-unbounded",
        "a send is counted whatever was spent: the budget never stops the resends",
        "handlers/scheduler_store.py",
        '"(contains(sends, :mine) OR size(sends) < :budget)"',
        '"(contains(sends, :mine) OR size(sends) < :budget OR #s = :firing)"',
        "slot",
    ),
    Mutant(
        "slot-claims-held-to-invocation-end",
        "finding 4: a claim is held until its invocation's end, not a minute at a time: a "
        "claimant that dies early strands its messages for up to 15 minutes and a sweep",
        "handlers/scheduler_slots.py",
        "        return min(self.end, time.time() + "
        "(LEASE_SECONDS if seconds is None else seconds))",
        "        return self.end",
        "slot",
    ),
    Mutant(
        "slot-lease-not-renewed",
        "a claim's lease is never renewed: a live claimant still waiting for a slow target "
        "is taken over, and its message sent again",
        "handlers/scheduler_slots.py",
        "                list(pool.map(lambda due: self._renew(*due), self._due()))",
        "                list(pool.map(lambda due: self._renew(*due), []))",
        "scheduler",
    ),
    # (slot-fifo-resent-past-window, a FIFO resend past the queue's 5-minute interval, is
    # out of the catalogue since claims are held a minute at a time (a FIFO target's even
    # while it waits, `Sending.keep_near`): a dead claimant's message is taken up within
    # the interval, and a resend past it needs an outage longer
    # than a schedule reaches (the Fire's retries spent, a sweep's restart). The guard is
    # held by tests/unit/test_scheduler_sends.py (a resend held back by throttles past the
    # interval, a takeover past it); the explorer's FIFO model still checks every resend.
    # Likewise slot-lease-left-after-a-send-that-ran (a claim whose send may still run put
    # on the waiting claims' three-minute lease once throttled): it only delays a dead
    # claimant's takeover, held by test_a_claim_waiting_for_its_send_is_held_longer...)
    Mutant(
        "slot-express-target-started",
        "an EXPRESS state machine is sent to: a resend starts a second execution of the "
        "message's name",
        "handlers/scheduler_slots.py",
        "    if express:\n        raise _express_target(machine)",
        "    if False:\n        raise _express_target(machine)",
        "scheduler and not slot and not cancelled",
    ),
    Mutant(
        "slot-execution-exists-is-failure",
        "a STANDARD target's ExecutionAlreadyExists (an earlier send started it, its answer "
        "lost) is taken for a refusal: the message ends FAILED though it ran",
        "handlers/scheduler_slots.py",
        """            if aws_code(exc) != "ExecutionAlreadyExists":
                raise""",
        """            if aws_code(exc) != "ExecutionAlreadyExists" or True:
                raise""",
        "scheduler and not slot and not cancelled",
    ),
    Mutant(
        "slot-bus-internal-failure-refused",
        "an event bus entry answered InternalFailure (it may have been put) is taken for a "
        "refusal: resent uncounted, past the send budget",
        "handlers/scheduler_slots.py",
        '            unseen = code == "InternalFailure"',
        "            unseen = False",
        "scheduler and not slot and not cancelled",
    ),
    Mutant(
        "sweep-moves-any-status",
        "the sweep moves a message its RESERVED lane lists to STANDBY whatever its status (a "
        "lagging index still listing a fired or cancelled one revives it)",
        "handlers/scheduler_sweep.py",
        "        moved = transition(config, message_id, (Status.RESERVED,), Status.STANDBY)",
        "        moved = transition(config, message_id, tuple(Status), Status.STANDBY)",
        "scheduler",
    ),
    Mutant(
        "sweep-leaves-dead-claims",
        "the sweep never restarts a slot whose claimant died: its messages stay FIRING",
        "handlers/scheduler_sweep.py",
        '        if float(image["lease"]["N"]) >= now - slots.LEASE_SKEW_SECONDS:',
        "        if True:",
        "slot",
    ),
    Mutant(
        "slot-second-read-behind-first",
        "the slot reads the index again only once the first read's deliveries are over, as "
        "94d2084 had it (finding 5 of the targets issue): a message the first read missed "
        "waits for the slowest of them",
        "handlers/scheduler_slots.py",
        """                    else:
                        first = reader.submit(fire_these, ids)
                    again = slot + 1""",
        """                    else:
                        first = reader.submit(fire_these, ids)
                        first.result()
                    again = slot + 1""",
        "slot",
    ),
    Mutant(
        "slot-reads-share-nothing",
        "the slot's second read takes up what its first read has in hand (the two run side "
        "by side): a message the lagging index still lists as waiting is claimed again by "
        "its own claimant and sent twice",
        "handlers/scheduler_slots.py",
        "            ids = [i for i in ids if i not in in_hand]",
        "            ids = list(ids)",
        "slot",
    ),
    Mutant(
        "sweep-firing-pass-unisolated",
        "the sweep's FIRING pass as 94d2084 had it (finding 6 of the targets issue): one "
        "message's failing call ends the run before its Overdue datum, restarting nothing",
        "handlers/scheduler_sweep.py",
        """    try:
        for message_id, publish_at in _due(config, Status.FIRING, horizon):
            if run.out_of_time():
                finished = False
                break
            try:  # one message's failing call leaves it to the next run, never the others
                late = consider(message_id)
                overdue += late if publish_at < now - OVERDUE_SECONDS else 0
            except Exception as exc:
                log("WARNING", "sweep: left", message_id=message_id, exc=exc)
                run.failed += 1
                unread.add(slots.slot_of(publish_at))
    except Exception as exc:  # an index read failed: what it held waits for the next run
        log("WARNING", "sweep: FIRING lanes left", exc=exc)
        run.failed += 1
        finished = False
""",
        """    for message_id, publish_at in _due(config, Status.FIRING, horizon):
        if run.out_of_time():
            finished = False
            break
        late = consider(message_id)
        overdue += late if publish_at < now - OVERDUE_SECONDS else 0
""",
        "scheduler",
    ),
    Mutant(
        "sweep-overdue-only-when-finished",
        "a sweep run that left messages (a call that kept failing) fails before its Overdue "
        "datum: the alarm, its missing data ignored, stays as it was",
        "handlers/scheduler_sweep.py",
        """    metrics.emit(PATTERN, Overdue=result["overdue"])
    if left:
        raise Unfinished(f"sweep left messages: {result}")""",
        """    if left:
        raise Unfinished(f"sweep left messages: {result}")
    metrics.emit(PATTERN, Overdue=result["overdue"])""",
        "scheduler",
    ),
    Mutant(
        "sweep-restarts-unrecorded",
        "the sweep restarts a slot whose claimant delivered a message and could not write "
        "so (StatusNotRecorded): the restart delivers it again",
        "handlers/scheduler_sweep.py",
        "        if claimed_by and claimed_by in cause.split():",
        "        if False:",
        "slot",
    ),
    # -- pattern 4: the resumable workflow ------------------------------------------------------
    Mutant(
        "resumable-save-without-lease",
        "the state machine's Save writes a step's entry without the lease condition (a run "
        "that lost its key goes on)",
        "components/resumable_asl.py",
        'update, values, condition="lease = :me")',
        'update, values, condition="attribute_exists(pk) OR lease = :me")',
        "resumable and step",
    ),
    Mutant(
        "resumable-holder-always-ended",
        "Load takes over the lease of a run that is still running",
        "handlers/resumable.py",
        "def _holder_ended(holder: str, saved_at: str | None) -> bool:\n",
        "def _holder_ended(holder: str, saved_at: str | None) -> bool:\n    return True\n",
        "resumable",
    ),
    Mutant(
        "resumable-takeover-unfenced",
        "Load takes over an ended holder's lease whatever the holder saved since the item "
        "was read (a holder redriven meanwhile runs its next step beside the taker)",
        "handlers/resumable.py",
        'f"lease = :holder AND {unchanged}", **values',
        '"lease = :holder", **{":holder": {"S": holder}}',
        "resumable and step",
    ),
    Mutant(
        "resumable-load-unstamped",
        "Load's claim stamps saved_at with a time that is not the claim's (as a redriven "
        "Load state's EnteredTime might be: a run redriven at its Load takes its own lease "
        "again unseen, and a re-run takes the key over beside it)",
        "handlers/resumable.py",
        'values[":stamped"] = {"S": timestamps.iso_ms(time.time())}',
        'values[":stamped"] = {"S": timestamps.iso_ms(0)}',
        "resumable and step",
    ),
    Mutant(
        "resumable-redriven-holder-ended",
        "Load believes DescribeExecution's FAILED for a holder that saved a step after its "
        "stopDate (redriven, running again)",
        "handlers/resumable.py",
        "        return saved <= stopped\n",
        "        return True\n",
        "resumable and step",
    ),
    Mutant(
        "resumable-describe-error-is-ended",
        "Load takes a holder whose DescribeExecution failed (a throttle, a 5xx) for ended: "
        "a run arriving while the holder is in a step takes the key over and runs it too",
        "handlers/resumable.py",
        """        if aws_code(exc) == "ExecutionDoesNotExist":  # past Step Functions' 90 days""",
        """        if aws_code(exc) == "ExecutionDoesNotExist" or True:""",
        "resumable and step",
    ),
    Mutant(
        "durable-describe-error-is-ended",
        "the durable form's Load takes a holder whose GetDurableExecution failed (a "
        "throttle, a 5xx) for ended: a run arriving while the holder is in a step takes "
        "the key over and runs it too",
        "handlers/resumable.py",
        """            if aws_code(exc) == "ResourceNotFoundException":  # past the retention""",
        """            if aws_code(exc) == "ResourceNotFoundException" or True:""",
        "resumable and durable",
    ),
    Mutant(
        "durable-reruns-done-step",
        "the durable form runs again a step an earlier run finished",
        "handlers/resumable_durable.py",
        '        if results[name].get("done"):',
        '        if results[name].get("done") and False:',
        "resumable and durable",
    ),
    Mutant(
        "durable-step-client-resends",
        "the durable form's step client back to the SDK's default retries: a step invoke "
        "whose answer is lost is sent again while it runs",
        "handlers/resumable_durable.py",
        'retries={"total_max_attempts": 1, "mode": "standard"},',
        'retries={"max_attempts": 3, "mode": "standard"},',
        "resumable and durable",
    ),
    # -- pattern 2: the API Gateway starter's mapping templates ----------------------------
    Mutant(
        "template-long-name-cut",
        "a key too long to name injectively is named by its body cut to 74 characters "
        "instead of refused (two long keys alike at the start become one execution)",
        "components/api_templates.py",
        '#set($name = "${{body}}-is-too-long-to-name-injectively")#end',
        "#set($name = $body.substring(0, {MAX_BODY}))#end",
        "api",
    ),
    Mutant(
        "template-exists-is-started",
        "the response template answers ExecutionAlreadyExists as a start (200, duplicate "
        "false): a duplicate request is told it started the execution",
        "components/api_templates.py",
        """#set($context.responseOverride.status = 409)
{{"duplicate": true, "message": "{_MESSAGE}"}}""",
        """#set($context.responseOverride.status = 200)
{{"duplicate": false, "message": "{_MESSAGE}"}}""",
        "api",
    ),
    Mutant(
        "template-retry-suffix-verbatim",
        "a key ending like a retry's suffix (k-r1) is named verbatim: it is attempt 1 of "
        "another key (k)",
        "components/api_templates.py",
        ' && !$key.matches("{_RETRY_SUFFIX}"))',
        ")",
        "api",
    ),
    Mutant(
        "template-input-without-request-id",
        "the execution input leaves out the request's id: the same request sent twice "
        "while its execution runs is the same input, and Step Functions answers both 200",
        "components/api_templates.py",
        "${{q}}requestId${{q}}:${{q}}$context.requestId${{q}}",
        "${{q}}requestId${{q}}:${{q}}-${{q}}",
        "api",
    ),
    Mutant(
        "template-refusal-under-the-keys-name",
        "a refused request (a bad X-Attempt) is sent under its key's name: where StartExecution "
        "checks the name before the input, it answers the key's execution's 409, not 400",
        "components/api_templates.py",
        '#set($name = "{INVALID_REQUEST}-$context.requestId")#end',
        "#end",
        "api",
    ),
)
