// Test helper: X.509 certificates made in the test (OpenSSL's API, P-256 keys), written as PEM
// files: a CA, certificates it issues, and self-signed ones, each naming 127.0.0.1 (and
// "localhost") as its subject alternative names, as a gateway on loopback needs. Header-only.
#pragma once

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>

namespace pf::test {

struct CertFiles {
  std::string cert;  // PEM certificate path
  std::string key;   // PEM private key path
};

class TestCert {
 public:
  // Self-signed (usable as its own trust root) when `issuer` is null; otherwise signed by it.
  // `ca`: may sign others.
  TestCert(const std::string& common_name, const TestCert* issuer, bool ca) {
    key_.reset(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
    cert_.reset(X509_new());
    if (!key_ || !cert_) throw std::runtime_error("test cert: allocation failed");
    X509* c = cert_.get();
    X509_set_version(c, 2);
    static long serial = 1;
    ASN1_INTEGER_set(X509_get_serialNumber(c), serial++);
    X509_gmtime_adj(X509_getm_notBefore(c), -60);
    X509_gmtime_adj(X509_getm_notAfter(c), 24 * 3600);
    X509_set_pubkey(c, key_.get());
    X509_NAME* name = X509_get_subject_name(c);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1,
                               0);
    X509* signer_cert = issuer ? issuer->cert_.get() : c;
    EVP_PKEY* signer_key = issuer ? issuer->key_.get() : key_.get();
    X509_set_issuer_name(c, X509_get_subject_name(signer_cert));
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, signer_cert, c, nullptr, nullptr, 0);
    add_extension(ctx, NID_basic_constraints, ca || !issuer ? "critical,CA:TRUE" : "CA:FALSE");
    if (ca) add_extension(ctx, NID_key_usage, "critical,keyCertSign,cRLSign,digitalSignature");
    add_extension(ctx, NID_subject_alt_name, "IP:127.0.0.1,DNS:localhost");
    if (X509_sign(c, signer_key, EVP_sha256()) <= 0) throw std::runtime_error("test cert: sign");
  }

  // Writes <dir>/<name>.pem and <dir>/<name>.key.
  CertFiles write(const std::string& dir, const std::string& name) const {
    CertFiles files{dir + "/" + name + ".pem", dir + "/" + name + ".key"};
    std::ofstream(files.cert) << pem_cert();
    std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
    PEM_write_bio_PrivateKey(bio.get(), key_.get(), nullptr, nullptr, 0, nullptr, nullptr);
    std::ofstream(files.key) << bio_text(bio.get());
    return files;
  }

  std::string pem_cert() const {
    std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
    PEM_write_bio_X509(bio.get(), cert_.get());
    return bio_text(bio.get());
  }

 private:
  static void add_extension(X509V3_CTX& ctx, int nid, const char* value) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
    if (!ext) throw std::runtime_error(std::string("test cert: extension ") + value);
    X509_add_ext(ctx.subject_cert, ext, -1);
    X509_EXTENSION_free(ext);
  }
  static std::string bio_text(BIO* bio) {
    char* data = nullptr;
    const long n = BIO_get_mem_data(bio, &data);
    return std::string(data, static_cast<std::size_t>(n));
  }

  struct KeyFree {
    void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
  };
  struct CertFree {
    void operator()(X509* c) const { X509_free(c); }
  };
  std::unique_ptr<EVP_PKEY, KeyFree> key_;
  std::unique_ptr<X509, CertFree> cert_;
};

}  // namespace pf::test
