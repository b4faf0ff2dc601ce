package transport

import "crypto/x509"

// CertificateName is the name a client certificate gives its holder: its
// subject common name, else its first DNS name, else "".
func CertificateName(cert *x509.Certificate) string {
	if cert.Subject.CommonName != "" {
		return cert.Subject.CommonName
	}
	if len(cert.DNSNames) > 0 {
		return cert.DNSNames[0]
	}
	return ""
}
