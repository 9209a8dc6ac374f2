package wire

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// PostgreSQL type OIDs the encoder treats specially. Every other type is sent as PostgreSQL's
// text output in a JSON string, which is exact for uuid, dates, times, intervals and ranges.
const (
	oidBool        = 16
	oidBytea       = 17
	oidInt8        = 20
	oidInt2        = 21
	oidInt4        = 23
	oidOID         = 26
	OIDJSON        = 114
	oidFloat4      = 700
	oidFloat8      = 701
	oidNumeric     = 1700
	OIDJSONB       = 3802
	oidBoolArr     = 1000
	oidByteaArr    = 1001
	oidInt2Arr     = 1005
	oidInt4Arr     = 1007
	oidInt8Arr     = 1016
	oidFloat4Arr   = 1021
	oidFloat8Arr   = 1022
	oidNumericArr  = 1231
	oidJSONArr     = 199
	oidJSONBArr    = 3807
	oidOIDArr      = 1028
	oidTextArr     = 1009
	oidVarcharArr  = 1015
	oidBPCharArr   = 1014
	oidNameArr     = 1003
	oidUUIDArr     = 2951
	oidDateArr     = 1182
	oidTimestampTZ = 1184
	oidTSTZArr     = 1185
	oidTSArr       = 1115
	oidTimeArr     = 1183
	oidIntervalArr = 1187
	oidCharArr     = 1002
	oidInetArr     = 1041
	oidCidrArr     = 651
)

// valueEncoder appends the JSON form of one non-NULL value given in PostgreSQL's text format.
type valueEncoder func(dst, text []byte) []byte

// arrayElems maps array type OIDs to their element type OIDs.
var arrayElems = map[uint32]uint32{
	oidBoolArr: oidBool, oidByteaArr: oidBytea, oidInt2Arr: oidInt2, oidInt4Arr: oidInt4,
	oidInt8Arr: oidInt8, oidFloat4Arr: oidFloat4, oidFloat8Arr: oidFloat8, oidNumericArr: oidNumeric,
	oidJSONArr: OIDJSON, oidJSONBArr: OIDJSONB, oidOIDArr: oidOID, oidTextArr: 25, oidVarcharArr: 1043,
	oidBPCharArr: 1042, oidNameArr: 19, oidUUIDArr: 2950, oidDateArr: 1082, oidTSTZArr: oidTimestampTZ,
	oidTSArr: 1114, oidTimeArr: 1083, oidIntervalArr: 1186, oidCharArr: 18, oidInetArr: 869, oidCidrArr: 650,
}

// encoderFor returns the encoder for a column of the given type OID.
func encoderFor(oid uint32) valueEncoder {
	switch oid {
	case oidInt2, oidInt4, oidOID:
		return appendRaw
	case oidInt8:
		return appendInt8
	case oidFloat4, oidFloat8:
		return appendFloat
	case oidBool:
		return appendBool
	case OIDJSON, OIDJSONB:
		return appendRaw
	case oidBytea:
		return appendBytea
	}
	if elem, ok := arrayElems[oid]; ok {
		enc := encoderFor(elem)
		return func(dst, text []byte) []byte { return appendArray(dst, text, enc) }
	}
	return appendString
}

func appendRaw(dst, text []byte) []byte { return append(dst, text...) }

// maxSafeInt is 2^53-1, the largest integer a JSON reader holding float64 keeps exactly.
const maxSafeInt = 1<<53 - 1

func appendInt8(dst, text []byte) []byte {
	// 15 digits are always below 2^53; only longer values need the exact check.
	if len(text) <= 15 {
		return append(dst, text...)
	}
	n, err := strconv.ParseInt(string(text), 10, 64)
	if err == nil && n <= maxSafeInt && n >= -maxSafeInt {
		return append(dst, text...)
	}
	return appendString(dst, text)
}

func appendFloat(dst, text []byte) []byte {
	switch string(text) {
	case "NaN", "Infinity", "-Infinity":
		return appendString(dst, text)
	}
	return append(dst, text...)
}

func appendBool(dst, text []byte) []byte {
	if len(text) == 1 && text[0] == 't' {
		return append(dst, "true"...)
	}
	return append(dst, "false"...)
}

func appendBytea(dst, text []byte) []byte {
	// bytea_output=hex gives `\x0a1b…`; anything else is sent as text.
	if len(text) >= 2 && text[0] == '\\' && text[1] == 'x' {
		raw := make([]byte, hex.DecodedLen(len(text)-2))
		if _, err := hex.Decode(raw, text[2:]); err == nil {
			dst = append(dst, '"')
			dst = base64.StdEncoding.AppendEncode(dst, raw)
			return append(dst, '"')
		}
	}
	return appendString(dst, text)
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. It escapes only what JSON requires (no HTML escaping)
// and replaces invalid UTF-8 with U+FFFD.
func appendString(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

func AppendString(dst []byte, s string) []byte { return appendString(dst, []byte(s)) }

// appendArray converts PostgreSQL's array text format (`{1,2,NULL}`, `{{"a b",c},{d,e}}`,
// `[0:1]={…}`) to a JSON array, encoding each element with enc.
func appendArray(dst, text []byte, enc valueEncoder) []byte {
	// Arrays with explicit bounds start with a dimension decoration; drop it.
	if len(text) > 0 && text[0] == '[' {
		if i := bytes.IndexByte(text, '='); i >= 0 {
			text = text[i+1:]
		}
	}
	out, rest, ok := parseArray(dst, text, enc)
	if !ok || len(bytes.TrimSpace(rest)) != 0 {
		return appendString(dst, text)
	}
	return out
}

func parseArray(dst, s []byte, enc valueEncoder) ([]byte, []byte, bool) {
	if len(s) == 0 || s[0] != '{' {
		return dst, s, false
	}
	dst = append(dst, '[')
	s = s[1:]
	if len(s) > 0 && s[0] == '}' {
		return append(dst, ']'), s[1:], true
	}
	var elem []byte
	for first := true; ; first = false {
		if !first {
			dst = append(dst, ',')
		}
		if len(s) == 0 {
			return dst, s, false
		}
		switch s[0] {
		case '{':
			var ok bool
			dst, s, ok = parseArray(dst, s, enc)
			if !ok {
				return dst, s, false
			}
		case '"':
			elem = elem[:0]
			i := 1
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				elem = append(elem, s[i])
			}
			if i >= len(s) {
				return dst, s, false
			}
			dst = enc(dst, elem)
			s = s[i+1:]
		default:
			i := 0
			for i < len(s) && s[i] != ',' && s[i] != '}' {
				i++
			}
			tok := s[:i]
			if string(tok) == "NULL" {
				dst = append(dst, "null"...)
			} else {
				dst = enc(dst, tok)
			}
			s = s[i:]
		}
		if len(s) == 0 {
			return dst, s, false
		}
		if s[0] == '}' {
			return append(dst, ']'), s[1:], true
		}
		if s[0] != ',' {
			return dst, s, false
		}
		s = s[1:]
	}
}

// Marshal marshals without HTML escaping, so `<`, `>` and `&` stay readable for a model.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// Unmarshal decodes one JSON value with numbers as json.Number, so that every number keeps its
// exact text and is bound as written (never through float64); data after the value is an error,
// and so is a key named twice in one object, at any depth (*DuplicateKeyError). It is how every
// JSON a caller sends is read: a call's arguments, a page token's, an approval decision, an MCP
// message (TestCallerJSONIsReadByWire lists the exceptions).
func Unmarshal(data []byte, v any) error {
	if dup := checkKeys(data); dup != nil {
		return dup
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("unexpected data after the JSON value")
	}
	return nil
}
