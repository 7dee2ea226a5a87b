"""``console drill``: the outbox pattern's practice drills on this deployment's configuration.

A scratch database (console.drill.scratch), a local relay that misbehaves on cue
(console.drill.relay), real ``console worker`` processes (console.drill.context),
the drills themselves (console.drill.drills) and their report (console.drill.report).
"""
