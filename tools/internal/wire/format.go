package wire

// Format is how a RowSet writes its rows (docs/design.md §12). Every format carries the same values;
// they differ in what the model pays for them.
type Format uint8

const (
	// Objects is a JSON array of objects keyed by column name: [{"id":1,"name":"Ann"}, …].
	Objects Format = iota
	// Columns is a JSON array of arrays in column order, with the names once in RowSet.Columns:
	// [[1,"Ann"], …]. Same value encoding as Objects, fewer tokens.
	Columns
	// CSV is RFC 4180 text with a header line and CRLF line ends, as one JSON string: values in
	// PostgreSQL's text form, NULL as an empty field, an empty string as "". For display.
	CSV
)

// ParseFormat reads a format argument; "" is Objects.
func ParseFormat(s string) (Format, bool) {
	switch s {
	case "", "objects":
		return Objects, true
	case "columns":
		return Columns, true
	case "csv":
		return CSV, true
	}
	return Objects, false
}

func (f Format) String() string {
	return [...]string{"objects", "columns", "csv"}[f]
}

// open writes the start of the data: [ or, for CSV, the opening quote and the header line.
func (rs *RowSet) open(enc *RowEncoder) {
	rs.opened = true
	if rs.Format != CSV {
		rs.Data = append(rs.Data, '[')
		return
	}
	rs.Data = append(rs.Data, '"')
	if len(enc.colNames) == 0 {
		return
	}
	for i, n := range enc.colNames {
		if i > 0 {
			rs.Data = append(rs.Data, ',')
		}
		rs.Data = appendCSVField(rs.Data, []byte(n))
	}
	rs.Data = append(rs.Data, `\r\n`...)
}

// close writes the end of the data, and the column names for Columns.
func (rs *RowSet) close(enc *RowEncoder) {
	if !rs.opened {
		rs.open(enc)
	}
	if rs.Format == CSV {
		rs.Data = append(rs.Data, '"')
		return
	}
	rs.Data = append(rs.Data, ']')
	if rs.Format == Columns {
		rs.Columns = append(rs.Columns[:0], '[')
		for i, n := range enc.colNames {
			if i > 0 {
				rs.Columns = append(rs.Columns, ',')
			}
			rs.Columns = AppendString(rs.Columns, n)
		}
		rs.Columns = append(rs.Columns, ']')
	}
}

// appendValues writes one row in rs's format.
func (rs *RowSet) appendValues(enc *RowEncoder, values [][]byte) {
	switch rs.Format {
	case Objects:
		if rs.RowCount > 0 {
			rs.Data = append(rs.Data, ',')
		}
		rs.Data = enc.AppendRow(rs.Data, values)
	case Columns:
		if rs.RowCount > 0 {
			rs.Data = append(rs.Data, ',')
		}
		rs.Data = append(rs.Data, '[')
		for i, v := range values {
			if i > 0 {
				rs.Data = append(rs.Data, ',')
			}
			if v == nil {
				rs.Data = append(rs.Data, "null"...)
			} else {
				rs.Data = enc.encs[i](rs.Data, v)
			}
		}
		rs.Data = append(rs.Data, ']')
	case CSV:
		for i, v := range values {
			if i > 0 {
				rs.Data = append(rs.Data, ',')
			}
			if v != nil {
				rs.Data = appendCSVField(rs.Data, v)
			}
		}
		rs.Data = append(rs.Data, `\r\n`...)
	}
}

// appendCSVField writes one non-NULL CSV field, JSON-escaped for the string it stands in: quoted
// when it holds a comma, a quote, a line break or nothing (so an empty string differs from NULL).
func appendCSVField(dst, v []byte) []byte {
	quote := len(v) == 0
	for _, c := range v {
		if c == ',' || c == '"' || c == '\n' || c == '\r' {
			quote = true
			break
		}
	}
	if !quote {
		return appendEscaped(dst, v)
	}
	dst = append(dst, `\"`...)
	start := 0
	for i, c := range v {
		if c == '"' {
			dst = appendEscaped(dst, v[start:i+1])
			dst = append(dst, `\"`...) // a quote inside a quoted field is doubled
			start = i + 1
		}
	}
	dst = appendEscaped(dst, v[start:])
	return append(dst, `\"`...)
}

// appendEscaped writes s as the inside of a JSON string.
func appendEscaped(dst, s []byte) []byte {
	start := len(dst)
	dst = appendString(dst, s)
	// appendString quotes; drop the quotes it added.
	copy(dst[start:], dst[start+1:len(dst)-1])
	return dst[:len(dst)-2]
}
