// Package tools turns the exported methods of a value into tools an LLM can
// call: a JSON schema per tool (the shape of Hugging Face's get_json_schema)
// and a strict dispatcher that decodes the model's JSON arguments and calls
// the method.
//
// # Which methods are tools
//
// [Discover] looks at the method set of the value's type, in name order
// (the order TRL renders them), and takes every exported method except:
//
//   - the reserved names Reset, Reward, Close and ToolDescriptions;
//   - names passed to [Exclude];
//   - methods promoted from an embedded field, unless [Promoted] is given.
//     (A method the type declares itself is a tool even when an embedded
//     field has one of the same name.)
//
// Every remaining method must have one of the forms
//
//	func (e *T) Name(ctx context.Context, args ArgsStruct) (R, error)
//	func (e *T) Name(ctx context.Context) (R, error)
//
// where ArgsStruct is a struct type (not a pointer) and R is any type. A
// method of any other form is an error at discovery naming it, never
// silently skipped: unexport it or list it in [Exclude].
//
// The tool's name is the method name in snake_case (Guess → "guess",
// MoveLeft → "move_left", GetURL → "get_url").
//
// # Descriptions
//
// The tool descriptions come from the value's ToolDescriptions method (the
// [Describer] interface), keyed by method name; it is called once per type,
// so it must not depend on the value's state. Each argument is one exported
// field of ArgsStruct:
//
//	type GuessArgs struct {
//		Word string `json:"word" desc:"the five-letter word to try"`
//		Hard *bool  `json:"hard" desc:"play in hard mode"`             // optional: pointer
//		Mode string `json:"mode" desc:"board size" enum:"small,large"`  // enum
//	}
//
// The json tag gives the argument's name (the field name when absent, "-"
// skips the field), the desc tag its description. A tool without a
// description, an argument without a desc tag, or a ToolDescriptions key
// that names no tool is an error at discovery. An argument is required
// unless its field is a pointer or its json tag says omitempty or omitzero.
// Nested structs, slices, arrays, maps with string keys, any and
// json.RawMessage are allowed; nested struct fields may carry desc and enum
// tags but need not. Go types map to JSON schema types as
// string → "string", integers → "integer", floats → "number", bool →
// "boolean", slices and arrays → "array" with "items", maps → "object" with
// "additionalProperties", structs → "object" with "properties" and
// "required". Pointers add "nullable": true, as get_json_schema does for
// Optional. The result type's schema is given as "return", as
// get_json_schema does for an annotated Python return. Schemas are ordered JSON: keys appear in the order
// get_json_schema writes them and properties in field order, because chat
// templates print them in key order.
//
// # Calls
//
// [Set.Call] decodes the arguments strictly (unknown or differently-cased
// keys, missing required arguments, wrong JSON types, null for a non-nullable
// argument and values outside an enum are all errors), calls the method and
// renders its result: a string as is, anything else as JSON. Every failure
// (unknown tool, bad arguments, an error returned by the tool, a panic in
// the tool) becomes the tool response {"error": "..."} for the model, and a
// non-nil error for the caller to count; nothing panics into the trainer.
//
// Tools defined at run time, such as those a remote MCP-style environment
// lists, are made with [New] from a schema and a function over raw JSON;
// [Tool.WithReturn] adds the result's schema, so that a tool listed by a
// server of ours renders exactly as the method it stands for.
//
// Reflection happens once per type; the result is cached, so Discover on a
// second value of a type only binds the cached tools to it.
package tools
