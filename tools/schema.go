package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// jsonType is the JSON schema type of a shape.
type jsonType uint8

const (
	tAny jsonType = iota
	tString
	tInteger
	tNumber
	tBoolean
	tArray
	tObject // a struct: fixed properties
	tMap    // a map: additionalProperties
)

var typeNames = [...]string{tAny: "", tString: "string", tInteger: "integer", tNumber: "number",
	tBoolean: "boolean", tArray: "array", tObject: "object", tMap: "object"}

// shape is the compiled schema of one Go type: what the JSON may look like
// and how to write its schema.
type shape struct {
	typ      jsonType
	gt       reflect.Type // the Go type (after pointers)
	nullable bool         // JSON null is accepted (pointer, slice, map, any)
	pointer  bool         // the Go type is a pointer: schema says nullable
	unsigned bool         // integer: an unsigned kind
	bits     int          // integer/number: bit size
	enum     []string     // allowed values as canonical JSON text
	elem     *shape       // tArray items, tMap values
	fields   []field      // tObject properties in order
	byName   map[string]int
}

// field is one property of an object shape.
type field struct {
	name     string
	goName   string
	desc     string
	required bool
	shape    *shape
}

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	unmarshalerTyp = reflect.TypeFor[json.Unmarshaler]()
	marshalerType  = reflect.TypeFor[json.Marshaler]()
)

// shapeOf compiles the shape of t. where names the place for errors;
// needDesc says whether struct fields must carry a desc tag (top level).
func shapeOf(t reflect.Type, where string, needDesc bool, seen map[reflect.Type]bool) (*shape, error) {
	s := &shape{}
	for t.Kind() == reflect.Pointer {
		s.pointer, s.nullable = true, true
		t = t.Elem()
	}
	s.gt = t
	if t == rawMessageType || t.Kind() == reflect.Interface && t.NumMethod() == 0 {
		s.typ, s.nullable = tAny, true
		return s, nil
	}
	if reflect.PointerTo(t).Implements(unmarshalerTyp) {
		return nil, fmt.Errorf("%s: type %s has its own UnmarshalJSON, so its schema is unknown", where, t)
	}
	switch t.Kind() {
	case reflect.String:
		s.typ = tString
	case reflect.Bool:
		s.typ = tBoolean
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		s.typ, s.bits = tInteger, t.Bits()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		s.typ, s.bits, s.unsigned = tInteger, t.Bits(), true
	case reflect.Float32, reflect.Float64:
		s.typ, s.bits = tNumber, t.Bits()
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil, fmt.Errorf("%s: byte slices and arrays are not supported (use string)", where)
		}
		elem, err := shapeOf(t.Elem(), where+"[]", false, seen)
		if err != nil {
			return nil, err
		}
		s.typ, s.elem = tArray, elem
		s.nullable = s.nullable || t.Kind() == reflect.Slice
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("%s: map keys must be strings, have %s", where, t.Key())
		}
		elem, err := shapeOf(t.Elem(), where+"{}", false, seen)
		if err != nil {
			return nil, err
		}
		s.typ, s.elem, s.nullable = tMap, elem, true
	case reflect.Struct:
		if seen[t] {
			return nil, fmt.Errorf("%s: recursive type %s", where, t)
		}
		seen[t] = true
		defer delete(seen, t)
		s.typ = tObject
		s.byName = map[string]int{}
		for i := range t.NumField() {
			sf := t.Field(i)
			if !sf.IsExported() {
				continue
			}
			name, opts, _ := strings.Cut(sf.Tag.Get("json"), ",")
			if name == "-" && opts == "" {
				continue
			}
			if sf.Anonymous {
				return nil, fmt.Errorf("%s: embedded field %s is not supported in tool arguments", where, sf.Name)
			}
			if name == "" {
				name = sf.Name
			}
			fwhere := fmt.Sprintf("%s: parameter %q (field %s)", where, name, sf.Name)
			if _, dup := s.byName[name]; dup {
				return nil, fmt.Errorf("%s: two fields named %q", where, name)
			}
			desc, hasDesc := sf.Tag.Lookup("desc")
			if needDesc && (!hasDesc || strings.TrimSpace(desc) == "") {
				return nil, fmt.Errorf("%s has no description: add a desc:\"…\" tag", fwhere)
			}
			fs, err := shapeOf(sf.Type, fwhere, false, seen)
			if err != nil {
				return nil, err
			}
			if e, ok := sf.Tag.Lookup("enum"); ok {
				if err := fs.setEnum(e); err != nil {
					return nil, fmt.Errorf("%s: %w", fwhere, err)
				}
			}
			omit := strings.Contains(","+opts+",", ",omitempty,") || strings.Contains(","+opts+",", ",omitzero,")
			s.byName[name] = len(s.fields)
			s.fields = append(s.fields, field{
				name: name, goName: sf.Name, desc: strings.TrimSpace(desc),
				required: !fs.pointer && !omit, shape: fs,
			})
		}
	default:
		return nil, fmt.Errorf("%s: unsupported type %s", where, t)
	}
	return s, nil
}

// setEnum parses an enum tag: comma-separated values of the field's type.
func (s *shape) setEnum(tag string) error {
	if tag == "" {
		return errors.New("empty enum tag")
	}
	for _, v := range strings.Split(tag, ",") {
		v = strings.TrimSpace(v)
		switch s.typ {
		case tString:
			b, _ := json.Marshal(v)
			s.enum = append(s.enum, string(b))
		case tInteger:
			if _, err := strconv.ParseInt(v, 10, 64); err != nil {
				return fmt.Errorf("enum value %q is not an integer", v)
			}
			s.enum = append(s.enum, v)
		default:
			return fmt.Errorf("enum is only allowed on string and integer fields, not %s", typeNames[s.typ])
		}
	}
	return nil
}

// writeSchema writes the JSON schema of s (without description) followed
// by the description desc when non-empty, in get_json_schema's key order:
// type, nullable, items/properties/required/additionalProperties, enum,
// description.
func (s *shape) writeSchema(b *bytes.Buffer, desc string) {
	b.WriteByte('{')
	n := 0
	key := func(k string) {
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		writeString(b, k)
		b.WriteByte(':')
	}
	if s.typ != tAny {
		key("type")
		writeString(b, typeNames[s.typ])
	}
	if s.pointer && s.typ != tAny {
		key("nullable")
		b.WriteString("true")
	}
	switch s.typ {
	case tArray:
		key("items")
		s.elem.writeSchema(b, "")
	case tObject:
		key("properties")
		s.writeProperties(b)
		if req := s.required(); len(req) > 0 {
			key("required")
			b.WriteByte('[')
			for i, r := range req {
				if i > 0 {
					b.WriteByte(',')
				}
				writeString(b, r)
			}
			b.WriteByte(']')
		}
	case tMap:
		key("additionalProperties")
		s.elem.writeSchema(b, "")
	}
	if len(s.enum) > 0 {
		key("enum")
		b.WriteString("[" + strings.Join(s.enum, ",") + "]")
	}
	if desc != "" {
		key("description")
		writeString(b, desc)
	}
	b.WriteByte('}')
}

// writeProperties writes the properties object of a struct shape.
func (s *shape) writeProperties(b *bytes.Buffer) {
	b.WriteByte('{')
	for i, f := range s.fields {
		if i > 0 {
			b.WriteByte(',')
		}
		writeString(b, f.name)
		b.WriteByte(':')
		f.shape.writeSchema(b, f.desc)
	}
	b.WriteByte('}')
}

// required lists the required property names in order.
func (s *shape) required() []string {
	var req []string
	for _, f := range s.fields {
		if f.required {
			req = append(req, f.name)
		}
	}
	return req
}

// parametersSchema is the parameters object of a tool with argument shape
// s (nil: no arguments).
func parametersSchema(s *shape) json.RawMessage {
	var b bytes.Buffer
	if s == nil {
		b.WriteString(`{"type":"object","properties":{}}`)
		return b.Bytes()
	}
	s.writeSchema(&b, "")
	return b.Bytes()
}
