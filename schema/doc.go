// Package schema compiles the JSON Schemas (draft 2020-12) of artifact
// types and validates artifact data against them, refusing any schema that
// would make the process read a file or a URL.
//
// It is pure: no I/O of its own (external references are refused, not
// loaded). The HTTP door validates writes with the registry's schemas; a
// bundle import validates every put against the type definition recorded
// in the chain at that commit (graph.TypeDef), so that an imported copy
// holds only data its own history allows. Both refuse the same schemas:
// another draft, and what [CheckCost] refuses (an expansion past its
// bound, a $ref cycle, a recursion that doubles with each level).
//
// A schema of plain keywords only also compiles to a [Fast] check
// ([CompileFast]), which answers valid or not as the library does, with
// one walk of the value that allocates nothing; callers that validate
// many values (a commit's ops and payloads) ask it first and the library
// only for a refusal, whose pointers and rules it names.
package schema
