package tools

import "strings"

// leadingWords returns up to n leading keywords of sql, upper-cased, skipping white space,
// "--" comments and nested "/* */" comments. It is no SQL parser: it only recognises the
// transaction-control statements that must be refused before anything runs; everything else is
// left to PostgreSQL.
func leadingWords(sql string, n int) []string {
	var words []string
	for i := skipBlank(sql, 0); i < len(sql) && len(words) < n; i = skipBlank(sql, i) {
		if c := sql[i]; !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return words
		}
		j := i
		for j < len(sql) && (sql[j] == '_' || sql[j] >= 'a' && sql[j] <= 'z' || sql[j] >= 'A' && sql[j] <= 'Z' || sql[j] >= '0' && sql[j] <= '9') {
			j++
		}
		words = append(words, strings.ToUpper(sql[i:j]))
		i = j
	}
	return words
}

// skipBlank is the position of the first byte at or after i that is neither white space nor in
// a comment.
func skipBlank(sql string, i int) int {
	for i < len(sql) {
		switch {
		case sql[i] == ' ' || sql[i] == '\t' || sql[i] == '\n' || sql[i] == '\r' || sql[i] == '\f':
			i++
		case strings.HasPrefix(sql[i:], "--"):
			for i < len(sql) && sql[i] != '\n' {
				i++
			}
		case strings.HasPrefix(sql[i:], "/*"):
			depth := 0
			for i < len(sql) {
				if strings.HasPrefix(sql[i:], "/*") {
					depth, i = depth+1, i+2
				} else if strings.HasPrefix(sql[i:], "*/") {
					depth, i = depth-1, i+2
					if depth == 0 {
						break
					}
				} else {
					i++
				}
			}
		default:
			return i
		}
	}
	return i
}

// transactionControl reports whether sql steers the transaction (BEGIN, COMMIT, ROLLBACK,
// SAVEPOINT, SET TRANSACTION, PREPARE TRANSACTION, …), which only pg_tx may do.
func transactionControl(sql string) bool {
	w := leadingWords(sql, 3)
	if len(w) == 0 {
		return false
	}
	switch w[0] {
	case "BEGIN", "START", "COMMIT", "END", "ROLLBACK", "ABORT", "SAVEPOINT", "RELEASE":
		return true
	case "PREPARE":
		return len(w) > 1 && w[1] == "TRANSACTION"
	case "SET", "RESET":
		rest := w[1:]
		if len(rest) > 0 && (rest[0] == "LOCAL" || rest[0] == "SESSION") {
			if rest[0] == "SESSION" && len(rest) > 1 && rest[1] == "CHARACTERISTICS" {
				return true
			}
			rest = rest[1:]
		}
		if len(rest) == 0 {
			return false
		}
		return rest[0] == "TRANSACTION" || strings.HasPrefix(rest[0], "TRANSACTION_") || strings.HasPrefix(rest[0], "DEFAULT_TRANSACTION_")
	}
	return false
}
